package serve

import (
	"errors"
	"fmt"
	"strings"

	"walletgl/internal/auth"
	"walletgl/internal/config"
)

// Settings are what both services are configured with around their own parts: the database
// (and its owner's URL for migrations), the HTTP address and its TLS files, the metrics address
// and the API keys' rate limit. Each is read from <PREFIX>_<NAME> (WALLET_…, GL_…).
type Settings struct {
	prefix             string
	DatabaseURL        string
	MigrateDatabaseURL string
	MigrateOnStart     bool
	HTTPAddr           string
	TLSCert            string // PEM certificate of the HTTP API (with TLSKey: HTTPS)
	TLSKey             string
	MetricsAddr        string // where GET /metrics is served without API keys ("": on the API, with metrics:read)
	RateLimit          string // each API key's allowance, RATE[:BURST] requests per second
	AuthFailureLimit   string // each client address's failed authentications, RATE[:BURST] per second
	AllowedHosts       string // comma-separated Host names the API answers ("": any)
}

// BindSettings binds the settings of the service whose variables start with prefix ("WALLET"),
// whose database is named database by default and whose API listens on addr by default.
func BindSettings(s *config.Set, c *Settings, prefix, database, addr string) {
	c.prefix = prefix
	name := strings.ToLower(prefix)
	if name == "gl" {
		name = "GL"
	}
	v := func(n string) string { return prefix + "_" + n }
	s.String(&c.DatabaseURL, v("DATABASE_URL"), "database-url", "postgres://postgres@127.0.0.1:5432/"+database+"?sslmode=disable",
		"the "+name+"'s PostgreSQL database (serve and migrate create it when missing)")
	s.String(&c.MigrateDatabaseURL, v("MIGRATE_DATABASE_URL"), "migrate-database-url", "",
		"the "+name+"'s database as its owner, for migrations (migrate, and serve at start), which then grant the user of "+
			v("DATABASE_URL")+" what the service needs (empty: "+v("DATABASE_URL")+", nothing granted)")
	s.Bool(&c.MigrateOnStart, v("MIGRATE_ON_START"), "migrate-on-start", true,
		"serve creates and migrates the database before it serves (false: run migrate first, and serve needs no owner's URL)")
	s.String(&c.HTTPAddr, v("HTTP_ADDR"), "http-addr", addr, "address of the "+name+"'s HTTP API")
	s.String(&c.TLSCert, v("TLS_CERT"), "tls-cert", "", "PEM certificate file: with "+v("TLS_KEY")+" the API is served over HTTPS (empty: HTTP)")
	s.String(&c.TLSKey, v("TLS_KEY"), "tls-key", "", "PEM private key file of "+v("TLS_CERT"))
	s.String(&c.MetricsAddr, v("METRICS_ADDR"), "metrics-addr", "",
		"address serving GET /metrics without API keys, for Prometheus (empty: /metrics on the API address, with a key holding metrics:read)")
	s.String(&c.RateLimit, v("RATE_LIMIT"), "rate-limit", auth.DefaultRateLimit.String(),
		"each API key's allowance: requests per second[:burst]; over it, 429 with Retry-After")
	s.String(&c.AuthFailureLimit, v("AUTH_FAILURE_LIMIT"), "auth-failure-limit", auth.DefaultFailureLimit.String(),
		"each client address's failed authentications: per second[:burst]; over it, 429 with Retry-After before any key is looked up")
	s.String(&c.AllowedHosts, v("ALLOWED_HOSTS"), "allowed-hosts", "",
		"comma-separated Host names the API answers; any other Host is 421 (empty: any; /livez, /readyz and /healthz answer any)")
}

// Validate reports every setting out of range.
func (c Settings) Validate() error {
	var errs []error
	v := func(n string) string { return c.prefix + "_" + n }
	if c.DatabaseURL == "" {
		errs = append(errs, errors.New(v("DATABASE_URL")+" is empty"))
	}
	if c.HTTPAddr == "" {
		errs = append(errs, errors.New(v("HTTP_ADDR")+" is empty"))
	}
	if _, err := auth.ParseRateLimit(c.RateLimit); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", v("RATE_LIMIT"), err))
	}
	if _, err := auth.ParseRateLimit(c.AuthFailureLimit); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", v("AUTH_FAILURE_LIMIT"), err))
	}
	if err := c.Listen().Validate(v("TLS_CERT"), v("TLS_KEY")); err != nil {
		errs = append(errs, err)
	}
	if err := c.Postgres().Validate(v("DATABASE_URL"), v("MIGRATE_DATABASE_URL")); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Postgres is the service's database: its URL, the owner's for migrations, whether serve migrates.
func (c Settings) Postgres() Database {
	return Database{URL: c.DatabaseURL, MigrateURL: c.MigrateDatabaseURL, MigrateOnStart: c.MigrateOnStart}
}

// Listen is where the HTTP API is served.
func (c Settings) Listen() Listen {
	return Listen{Addr: c.HTTPAddr, CertFile: c.TLSCert, KeyFile: c.TLSKey, AllowedHosts: ParseHosts(c.AllowedHosts)}
}

// Database is the service's database URL (the commands both binaries share read it).
func (c Settings) Database() string { return c.DatabaseURL }

// OwnerDatabase is the database as its owner, the migrate URL ("": not set): the commands that
// write what the runtime role may not (keys create, keys revoke) connect with it.
func (c Settings) OwnerDatabase() string { return c.MigrateDatabaseURL }
