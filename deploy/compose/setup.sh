#!/bin/sh
# One-shot, with the services' image (compose.yaml's setup job), after db-roles.sh: migrates
# each database as its owner, which grants the runtime roles; makes the event signing keys and
# the API keys once; and gives each service only its own (a volume each, read-only to it):
#   /wallet/env   WALLET_DATABASE_URL (the runtime role), GL_API_KEY (ledger:read, metrics:read),
#                 NATS_PASSWORD (the broker's user wallet, from the nats-passwords job)
#   /wallet/      wallet.key, gl.pub
#   /gl/env       GL_DATABASE_URL (the runtime role), NATS_PASSWORD (the broker's user gl), and
#                 GL_READ_DATABASE_URL when db.env has one (the profile ha's standbys)
#   /gl/          gl.key, wallet.pub
#   /setup/operator.env  an admin key of each service for the operator (WALLET_API_KEY, GL_API_KEY)
# Owner URLs stay in /setup, which no service mounts.
set -eu
umask 077
set -a
. /setup/db.env
set +a
wallet migrate
gl migrate

mkdir -p /setup/events
[ -f /setup/events/wallet.key ] || wallet events keygen /setup/events
[ -f /setup/events/gl.key ] || gl events keygen /setup/events

# keys create writes as the owner (WALLET_MIGRATE_DATABASE_URL, GL_MIGRATE_DATABASE_URL) and
# prints the secret on its last line.
if [ ! -f /setup/keys.env ]; then
	wallet_admin=$(wallet keys create --name operator --scopes admin)
	gl_admin=$(gl keys create --name operator --scopes admin)
	wallet_gl=$(gl keys create --name wallet --scopes ledger:read,metrics:read)
	{
		echo "WALLET_ADMIN_KEY=$(echo "$wallet_admin" | tail -n 1)"
		echo "GL_ADMIN_KEY=$(echo "$gl_admin" | tail -n 1)"
		echo "WALLET_GL_KEY=$(echo "$wallet_gl" | tail -n 1)"
	} >/setup/keys.env.new
	mv /setup/keys.env.new /setup/keys.env
fi
. /setup/keys.env
echo "export WALLET_API_KEY=$WALLET_ADMIN_KEY GL_API_KEY=$GL_ADMIN_KEY" >/setup/operator.env

cp /setup/events/wallet.key /setup/events/gl.pub /wallet/
cp /setup/events/gl.key /setup/events/wallet.pub /gl/
{
	echo "WALLET_DATABASE_URL='$WALLET_DATABASE_URL'"
	echo "GL_API_KEY='$WALLET_GL_KEY'"
	echo "NATS_PASSWORD='$(cat /nats/wallet)'"
} >/wallet/env
{
	echo "GL_DATABASE_URL='$GL_DATABASE_URL'"
	[ -z "${GL_READ_DATABASE_URL:-}" ] || echo "GL_READ_DATABASE_URL='$GL_READ_DATABASE_URL'"
	echo "NATS_PASSWORD='$(cat /nats/gl)'"
} >/gl/env
chown -R app /wallet /gl
