package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/envtest"
	"walletgl/internal/serve"
)

func TestMigrateCreatesTheDatabaseAsTheOwnerAndGrantsTheRuntimeRole(t *testing.T) {
	t.Parallel()
	ownerURL := envtest.DatabaseURL(t)
	require.NoError(t, database.Drop(context.Background(), ownerURL), "migrate creates it")
	runtimeURL := envtest.RoleURL(t, ownerURL)
	env := map[string]string{"GL_DATABASE_URL": runtimeURL, "GL_MIGRATE_DATABASE_URL": ownerURL, "LOG_FORMAT": "json"}

	_, errOut, err := runGL(t, env, "migrate")
	require.NoError(t, err)
	require.Contains(t, errOut, "runtime role granted the service's privileges")

	asRuntime := map[string]string{"GL_DATABASE_URL": runtimeURL}
	_, _, err = runGL(t, asRuntime, "accounts", "add", "4010", "--name", "Fees", "--type", "revenue")
	require.NoError(t, err, "operator commands run as the runtime role")
	_, _, err = runGL(t, asRuntime, "verify")
	require.NoError(t, err)
	_, _, err = runGL(t, asRuntime, "migrate")
	require.ErrorContains(t, err, "permission denied")
	require.ErrorContains(t, err, "set GL_MIGRATE_DATABASE_URL")

	env["GL_MIGRATE_DATABASE_URL"] = envtest.DatabaseURL(t)
	_, _, err = runGL(t, env, "migrate")
	require.ErrorContains(t, err, "must name the same one")
}

func TestReplayMigratesItsTargetAsTheOwner(t *testing.T) {
	t.Parallel()
	target := "postgres://gl_app@db.internal:5432/gl_replay_20260101t000000?sslmode=verify-full"
	d, err := replayTarget(serve.Database{URL: "postgres://gl_app@db.internal:5432/gl?sslmode=verify-full"}, target)
	require.NoError(t, err)
	require.Equal(t, serve.Database{URL: target, MigrateOnStart: true}, d, "no owner's URL: the target's own")

	d, err = replayTarget(serve.Database{
		URL:        "postgres://gl_app@db.internal:5432/gl?sslmode=verify-full",
		MigrateURL: "postgres://gl_owner:secret@db.internal:5432/gl?sslmode=verify-full",
	}, target)
	require.NoError(t, err)
	require.Equal(t, serve.Database{
		URL:            target,
		MigrateURL:     "postgres://gl_owner:secret@db.internal:5432/gl_replay_20260101t000000?sslmode=verify-full",
		MigrateOnStart: true,
	}, d)

	// An HA cluster's URLs list every server: the target's owner URL keeps them all.
	const hosts = "pg-1.internal:5432,pg-2.internal:5432,pg-3.internal:5432"
	multiTarget := "postgres://gl_app@" + hosts + "/gl_replay_20260101t000000?target_session_attrs=read-write"
	d, err = replayTarget(serve.Database{
		URL:        "postgres://gl_app@" + hosts + "/gl?target_session_attrs=read-write",
		MigrateURL: "postgres://gl_owner:secret@" + hosts + "/gl?target_session_attrs=read-write",
	}, multiTarget)
	require.NoError(t, err)
	require.Equal(t, serve.Database{
		URL:            multiTarget,
		MigrateURL:     "postgres://gl_owner:secret@" + hosts + "/gl_replay_20260101t000000?target_session_attrs=read-write",
		MigrateOnStart: true,
	}, d)
}
