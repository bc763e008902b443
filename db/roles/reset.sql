-- The runtime role's privileges are rebuilt from nothing after every migrate (internal/database
-- Grant), in one transaction: this file first, then the file of each migration set the service
-- applies (events.sql, auth.sql, then wallet.sql or gl.sql). What those files grant is therefore
-- exactly what the role holds, whatever an earlier version or a person granted it by hand.
-- :"runtime_role" is the user of the service's runtime URL, :"database" its database (the same
-- placeholders as psql's -v, so `psql -v runtime_role=… -v database=… -f` runs these files too).

-- Two instances migrating at start would otherwise race on the same catalog rows ("tuple
-- concurrently updated").
SELECT pg_advisory_xact_lock(hashtext('walletgl: grant the runtime role'));

REVOKE ALL ON ALL TABLES IN SCHEMA public FROM :"runtime_role";
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM :"runtime_role";

-- No DDL: nobody but the owner creates objects in the schema (PostgreSQL 15 no longer lets
-- PUBLIC; older servers did, and a database created from an old template may still).
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
REVOKE ALL ON SCHEMA public FROM :"runtime_role";
GRANT USAGE ON SCHEMA public TO :"runtime_role";

-- Each service's role reaches its own database only: by default every role may connect to every
-- database (PUBLIC holds CONNECT). Other readers (an analyst, the GL's reconcile reading the
-- wallet's view) get CONNECT from the database's owner by name (docs/database-roles.md).
REVOKE CONNECT, TEMPORARY ON DATABASE :"database" FROM PUBLIC;
REVOKE ALL ON DATABASE :"database" FROM :"runtime_role";
GRANT CONNECT ON DATABASE :"database" TO :"runtime_role";
