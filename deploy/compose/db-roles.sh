#!/bin/sh
# One-shot, as PostgreSQL's superuser (compose.yaml's dbroles job): each service's owner role,
# which creates and migrates its database, and its runtime role, which the service runs as
# (docs/database-roles.md). Passwords are made once, kept in the setup volume (/setup) and set
# again at every run, so a new pgdata volume gets the same ones. Writes /setup/db.env: the
# owner's and the runtime role's URL of each service. DB_HOSTS lists the servers (default
# postgres:5432); several (the profile ha's Patroni members) make multi-host URLs that follow the
# primary (target_session_attrs=read-write), and GL_READ_DATABASE_URL, the GL's reads from a
# standby (prefer-standby).
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
HOSTS=${DB_HOSTS:-postgres:5432}
# url ROLE DATABASE [TARGET_SESSION_ATTRS]
url() {
	attrs=""
	case "$HOSTS" in *,*) attrs="&target_session_attrs=${3:-read-write}" ;; esac
	echo "postgres://$1:$(password "$1")@$HOSTS/$2?sslmode=${PGSSLMODE_SERVICES:-disable}$attrs"
}
{
	echo "WALLET_MIGRATE_DATABASE_URL='$(url wallet_owner wallet)'"
	echo "WALLET_DATABASE_URL='$(url wallet_app wallet)'"
	echo "GL_MIGRATE_DATABASE_URL='$(url gl_owner gl)'"
	echo "GL_DATABASE_URL='$(url gl_app gl)'"
	case "$HOSTS" in *,*) echo "GL_READ_DATABASE_URL='$(url gl_app gl prefer-standby)'" ;; esac
} >"$SETUP/db.env"
