package database_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"walletgl/internal/database"
	"walletgl/internal/envtest"
)

// BenchmarkEncodeUUIDArray encodes an array of 100 ids, as a batch statement's id = ANY($1)
// sends it, with pgx's own type map and with the one a service's pool gives its connections
// (EncodeUUIDsDirectly): go test ./internal/database -run '^$' -bench EncodeUUIDArray -benchmem
func BenchmarkEncodeUUIDArray(b *testing.B) {
	ids := make([]uuid.UUID, 100)
	for i := range ids {
		ids[i] = uuid.New()
	}
	for _, tc := range []struct {
		name string
		m    func(*testing.B) *pgtype.Map
	}{
		{"pgx default", func(*testing.B) *pgtype.Map { return pgtype.NewMap() }},
		{"service pool", poolTypeMap},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m := tc.m(b)
			for b.Loop() {
				if _, err := m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, ids, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// poolTypeMap is the type map of a connection of a pool opened as the services open theirs.
func poolTypeMap(b *testing.B) *pgtype.Map {
	ctx := context.Background()
	pool, err := database.Open(ctx, envtest.DatabaseURL(b), 1)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(conn.Release)
	return conn.Conn().TypeMap()
}
