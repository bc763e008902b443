#!/bin/sh
# One-shot, as PostgreSQL's superuser (compose.yaml's dbroles job): each service's owner role,
# which creates and migrates its database, and its runtime role, which the service runs as
# (docs/database-roles.md). Passwords are made once, kept in the setup volume (/setup) and set
# again at every run, so a new pgdata volume gets the same ones. Writes /setup/db.env: the
# owner's and the runtime role's URL of each service.
set -eu
umask 077
SETUP=${SETUP_DIR:-/setup}
password() {
	[ -f "$SETUP/$1.password" ] || head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$SETUP/$1.password"
	cat "$SETUP/$1.password"
}
for role in wallet_owner wallet_app gl_owner gl_app; do
	pw=$(password "$role")
	case "$role" in *_owner) extra=CREATEDB ;; *) extra=NOCREATEDB ;; esac
	psql -v ON_ERROR_STOP=1 -q -v role="$role" -v pw="$pw" <<SQL
SELECT format('CREATE ROLE %I', :'role') WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role') \gexec
ALTER ROLE :"role" LOGIN NOSUPERUSER NOCREATEROLE $extra PASSWORD :'pw';
SQL
done
url() { echo "postgres://$1:$(password "$1")@postgres:5432/$2?sslmode=${PGSSLMODE_SERVICES:-disable}"; }
{
	echo "WALLET_MIGRATE_DATABASE_URL='$(url wallet_owner wallet)'"
	echo "WALLET_DATABASE_URL='$(url wallet_app wallet)'"
	echo "GL_MIGRATE_DATABASE_URL='$(url gl_owner gl)'"
	echo "GL_DATABASE_URL='$(url gl_app gl)'"
} >"$SETUP/db.env"
