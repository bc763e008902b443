package serve_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/serve"
	"walletgl/internal/systemtest"
)

// selfSigned writes a certificate for 127.0.0.1 and its key into dir and returns their paths
// and a pool that trusts the certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "walletgl test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

func TestTheAPIIsServedOverTLSWhenACertificateIsGiven(t *testing.T) {
	t.Parallel()
	certFile, keyFile, roots := selfSigned(t, t.TempDir())
	addr, err := systemtest.FreeAddr()
	require.NoError(t, err)
	l := serve.Listen{Addr: addr, CertFile: certFile, KeyFile: keyFile}
	require.NoError(t, l.Validate("CERT", "KEY"))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	go func() { done <- serve.Run(ctx, l, handler, nil, zerolog.Nop()) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	require.Eventually(t, func() bool {
		res, err := client.Get("https://" + addr + "/healthz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK && res.TLS != nil
	}, 10*time.Second, 50*time.Millisecond, "served over TLS, with the given certificate")
	res, err := http.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusBadRequest, res.StatusCode, "no plain HTTP on a TLS listener")
}

func TestTLSSettingsGoTogetherAndMustLoad(t *testing.T) {
	t.Parallel()
	require.NoError(t, serve.Listen{Addr: "x"}.Validate("C", "K"))
	require.ErrorContains(t, serve.Listen{Addr: "x", CertFile: "c.pem"}.Validate("C", "K"), "C and K go together")
	require.ErrorContains(t, serve.Listen{Addr: "x", CertFile: "/nonexistent/c", KeyFile: "/nonexistent/k"}.Validate("C", "K"), "C / K")
}
