package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/events"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/signing"
	"walletgl/internal/systemtest"
)

// "A TransferCompleted.v1 published straight to the wallet's subject on the broker
// (no credentials needed) with a made-up transfer of CHF 5,000,000 was posted to the GL within
// 20 ms, and the GL even acknowledged it back. A forged TransferPosted.v1 moved a wallet outbox
// row to acknowledged while the GL had no entry."
//
// With the real binaries: forged events of both kinds — unsigned, signed with a key nobody
// trusts, signed by the other service, and a real event's signature on altered bytes — are
// recorded failed as unauthenticated, visible in inbox list/stats and health, and none is
// applied or acknowledged; the real events still flow; the wallet's key is rotated (the GL
// trusts two wallet keys) and events signed with either are posted.
func TestForgedEventsAreNeitherAppliedNorAcknowledged(t *testing.T) {
	t.Parallel()
	s := startSystem(t)
	ctx := context.Background()
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "bank", "CHF", true))
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "alice", "CHF", false))
	nc, err := nats.Connect(s.natsURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	topo := events.Topology{Namespace: s.namespace, MaxBytes: envtest.StreamMaxBytes}
	completedSubject := topo.Subject(contract.SourceWallet, contract.TypeTransferCompletedV2) // what the wallet publishes by default
	postedSubject := topo.Subject(contract.SourceGL, contract.TypeTransferPostedV2)
	postedV1Subject := topo.Subject(contract.SourceGL, contract.TypeTransferPosted) // still read: earlier GLs publish it

	transfer := func(key string, amount int64) (transferID, rowID string) {
		t.Helper()
		resp, err := s.walletAPI.Transfer(ctx, key, systemtest.TransferRequest{FromWalletID: "bank", ToWalletID: "alice", Amount: amount, Currency: "CHF"})
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
		var tr systemtest.Transfer
		require.NoError(t, resp.Decode(&tr))
		require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT id::text FROM outbox WHERE aggregate_id = $1", tr.ID).Scan(&rowID))
		return tr.ID, rowID
	}
	rowStatus := func(rowID string) string {
		var status string
		require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT status FROM outbox WHERE id = $1", rowID).Scan(&status))
		return status
	}
	waitAcknowledged := func(rowID string) {
		t.Helper()
		require.Eventually(t, func() bool { return rowStatus(rowID) == "acknowledged" }, 60*time.Second, 100*time.Millisecond,
			"the real transfer is posted and acknowledged")
	}
	unauthenticated := func(service string) int {
		t.Helper()
		db := s.walletDB
		if service == contract.SourceGL {
			db = s.glDB
		}
		var n int
		require.NoError(t, db.QueryRow(ctx, "SELECT count(*) FROM inbox WHERE status = 'failed' AND reason = 'unauthenticated'").Scan(&n))
		return n
	}
	publish := func(subject string, body []byte, header nats.Header) {
		t.Helper()
		msg := nats.NewMsg(subject)
		msg.Data = body
		for k, v := range header {
			msg.Header[k] = v
		}
		_, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(uuid.NewString()))
		require.NoError(t, err)
	}
	signed := func(k *signing.Key, body []byte) nats.Header {
		msg := &nats.Msg{Data: body}
		k.Sign(msg)
		return msg.Header
	}
	lastMessage := func(subject string) *jetstream.RawStreamMsg {
		t.Helper()
		stream, err := js.Stream(ctx, topo.StreamName(strings.SplitN(strings.TrimPrefix(subject, s.namespace+"."), ".", 2)[0]))
		require.NoError(t, err)
		msg, err := stream.GetLastMsgForSubject(ctx, subject)
		require.NoError(t, err)
		return msg
	}
	// Forgeries do not take a service down: /healthz answers 200, with a warning.
	requireHealthWarning := func(p *systemtest.Process) {
		t.Helper()
		resp, err := http.Get("http://" + p.Addr + "/healthz")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", p.Name, body)
		require.Contains(t, string(body), `"unauthenticated_events":"warning"`, "%s", p.Name)
		require.NotContains(t, string(body), `"event_signing":"warning"`)
	}
	envelope := func(source, eventType string, data any) []byte {
		raw, err := json.Marshal(data)
		require.NoError(t, err)
		body, err := json.Marshal(contract.Envelope{SpecVersion: "1.0", ID: uuid.NewString(), Source: source, Type: eventType,
			Time: time.Now().UTC(), DataContentType: "application/json", Data: raw})
		require.NoError(t, err)
		return body
	}
	walletKey, err := signing.ReadKey(filepath.Join(s.keys.Dir, "wallet.key"))
	require.NoError(t, err)
	glKey, err := signing.ReadKey(filepath.Join(s.keys.Dir, "gl.key"))
	require.NoError(t, err)
	strangerWallet, err := signing.GenerateKey(contract.SourceWallet)
	require.NoError(t, err)
	strangerGL, err := signing.GenerateKey(contract.SourceGL)
	require.NoError(t, err)

	// A real transfer flows, signed both ways.
	first, firstRow := transfer("sign-1", 1234)
	waitAcknowledged(firstRow)
	realCompleted, realPosted := lastMessage(completedSubject), lastMessage(postedSubject)
	require.Equal(t, walletKey.Public().ID, realCompleted.Header.Get(signing.HeaderKeyID))
	require.Equal(t, glKey.Public().ID, realPosted.Header.Get(signing.HeaderKeyID))

	// With the GL stopped, a transfer waits for its acknowledgment, and forged acknowledgments of
	// it arrive at the wallet.
	require.NoError(t, s.gl.Stop(20*time.Second))
	second, secondRow := transfer("sign-2", 2345)
	require.Eventually(t, func() bool { return rowStatus(secondRow) == "dispatched" }, 30*time.Second, 50*time.Millisecond)
	forgedPosting := contract.TransferPosted{TransferID: second, SourceEventID: secondRow, EntryID: uuid.NewString(), PostedAt: time.Now().UTC()}
	forgedPosted := envelope(contract.SourceGL, contract.TypeTransferPosted, forgedPosting)
	forgedPostings := envelope(contract.SourceGL, contract.TypeTransferPostedV2, contract.TransferPostings{Postings: []contract.TransferPosted{forgedPosting}})
	publish(postedV1Subject, forgedPosted, nil)
	publish(postedSubject, forgedPostings, signed(strangerGL, forgedPostings))
	publish(postedV1Subject, forgedPosted, signed(walletKey, forgedPosted))
	replayedPosted := strings.NewReplacer(firstRow, secondRow, first, second).Replace(string(realPosted.Data))
	require.NotEqual(t, string(realPosted.Data), replayedPosted)
	publish(postedSubject, []byte(replayedPosted), realPosted.Header)
	require.Eventually(t, func() bool { return unauthenticated(contract.SourceWallet) == 4 }, 30*time.Second, 50*time.Millisecond,
		"the wallet records each forged acknowledgment failed")
	require.Equal(t, "dispatched", rowStatus(secondRow), "no forged acknowledgment acknowledged the row")
	requireHealthWarning(s.wallet)

	// Forged transfers of CHF 5,000,000 for the GL.
	forgedID := "forged-" + uuid.NewString()
	forgedCompleted := envelope(contract.SourceWallet, contract.TypeTransferCompletedV2, contract.TransferCompleted{
		TransferID: forgedID, FromWalletID: "bank", ToWalletID: "alice", Amount: 5_000_000_00, Currency: "CHF",
		Kind: contract.KindDeposit, CreatedAt: time.Now().UTC()})
	publish(completedSubject, forgedCompleted, nil)
	publish(completedSubject, forgedCompleted, signed(strangerWallet, forgedCompleted))
	publish(completedSubject, forgedCompleted, signed(glKey, forgedCompleted))
	replayedCompleted := regexp.MustCompile(`"amount": ?1234`).ReplaceAllString(strings.ReplaceAll(string(realCompleted.Data), first, forgedID), `"amount": 500000000`)
	require.Contains(t, replayedCompleted, "500000000")
	publish(completedSubject, []byte(replayedCompleted), realCompleted.Header)

	// Key rotation, step one: the GL comes back trusting the wallet's current key and its next.
	rotated := filepath.Join(t.TempDir(), "rotated")
	out, err := s.command(t, s.bins.Wallet, nil, "events", "keygen", rotated)
	require.NoError(t, err, out)
	s.gl.Env = append(s.gl.Env, "EVENTS_TRUSTED_KEYS="+filepath.Join(s.keys.Dir, "wallet.pub")+","+filepath.Join(rotated, "wallet.pub"))
	require.NoError(t, s.gl.Start())
	waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	require.NoError(t, s.gl.WaitHealthy(waitCtx))
	waitAcknowledged(secondRow)
	require.Eventually(t, func() bool { return unauthenticated(contract.SourceGL) == 4 }, 30*time.Second, 50*time.Millisecond,
		"the GL records each forged transfer failed")

	// Step two: the wallet signs with its new key; what it publishes now is posted too.
	require.NoError(t, s.wallet.Stop(20*time.Second))
	s.wallet.Env = append(s.wallet.Env, "EVENTS_SIGNING_KEY_FILE="+filepath.Join(rotated, "wallet.key"))
	require.NoError(t, s.wallet.Start())
	require.NoError(t, s.wallet.WaitHealthy(waitCtx))
	third, thirdRow := transfer("sign-3", 3456)
	waitAcknowledged(thirdRow)
	newKey, err := signing.ReadPublicKey(filepath.Join(rotated, "wallet.pub"))
	require.NoError(t, err)
	require.Equal(t, newKey.ID, lastMessage(completedSubject).Header.Get(signing.HeaderKeyID), "signed with the new key")

	// The GL posted the three real transfers and nothing else, and acknowledged only those.
	var entries []string
	rows, err := s.glDB.Query(ctx, "SELECT transfer_id FROM journal_entries ORDER BY posted_at")
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		entries = append(entries, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{first, second, third}, entries, "no entry for the forged transfer")
	var acks int
	require.NoError(t, s.glDB.QueryRow(ctx, "SELECT coalesce(sum(jsonb_array_length(payload->'data'->'postings')), 0) FROM outbox WHERE event_type = $1",
		contract.TypeTransferPostedV2).Scan(&acks))
	require.Equal(t, 3, acks, "nothing forged was acknowledged back")
	require.Equal(t, 4, unauthenticated(contract.SourceWallet))

	// Operators see them: inbox stats and list, and a warning in /healthz.
	glEnv := []string{"GL_DATABASE_URL=" + s.glDBURL}
	out, err = s.command(t, s.bins.GL, glEnv, "inbox", "stats")
	require.NoError(t, err, out)
	require.Regexp(t, `(?m)^failed\s+4$`, out)
	require.Contains(t, out, "unauthenticated 4")
	out, err = s.command(t, s.bins.GL, glEnv, "inbox", "list", "--json")
	require.NoError(t, err, out)
	var failed []admin.InboxRow
	require.NoError(t, json.Unmarshal([]byte(out), &failed))
	require.Len(t, failed, 4)
	for _, row := range failed {
		require.Equal(t, contract.ReasonUnauthenticated, row.Reason)
		require.Contains(t, row.Payload, "500000000", "the forgery is kept for the record")
	}
	out, err = s.command(t, s.bins.GL, glEnv, "inbox", "retry", failed[0].ID)
	require.Error(t, err, "a forgery is never retried")
	require.Contains(t, out, "never retried")
	requireHealthWarning(s.gl)
	out, err = s.command(t, s.bins.GL, glEnv, "verify")
	require.NoError(t, err, out)
}
