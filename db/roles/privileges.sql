-- Who the service's connection is (internal/database CheckPrivileges): serve warns when it is a
-- superuser or an owner, which the privileges of db/roles hold back in nothing.
SELECT current_user::text AS role,
       r.rolsuper AS superuser,
       -- Owner of the database or of a table, view or sequence in the schema, or a member of a
       -- role that is: an owner's privileges cannot be taken from it.
       pg_has_role(d.datdba, 'USAGE')
       OR EXISTS (SELECT 1 FROM pg_class c
                  WHERE c.relnamespace = to_regnamespace(current_schema())
                    AND pg_has_role(c.relowner, 'USAGE')) AS owner,
       has_schema_privilege(current_schema(), 'CREATE') AS can_create
FROM pg_roles r, pg_database d
WHERE r.rolname = current_user AND d.datname = current_database();
