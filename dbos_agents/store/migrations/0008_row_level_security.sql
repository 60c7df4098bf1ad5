-- Tenants and users isolated by Postgres itself (issue: security).
--
-- Application roles are registered in app_roles by `dbos-agents migrate --app-role NAME`.
-- A member of one sees only the rows of the user (and, when set, the tenant) named by the
-- transaction-local settings dbos_agents.user_id / dbos_agents.tenant_id:
--   sessions: read, create (only as itself) and update its own;
--   messages, tool_calls, pending_calls, usage: read its own, never write;
--   workers, schema_migrations: nothing (app_roles: its role names, readable by all).
-- Every other role keeps what its grants give it: the owner (workers, migrations) is not
-- subject to RLS (the tables are not FORCEd: an application role never owns them), and a
-- non-owner service role that is not an application role passes every policy, as before.
-- Sub-agent sessions carry the user and tenant of their root (RunSpec), so they follow.

CREATE TABLE dbos_agents.app_roles (
    role_name text PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Readable by everyone (role names only): the policies below evaluate it as the caller.
GRANT SELECT ON dbos_agents.app_roles TO PUBLIC;

CREATE FUNCTION dbos_agents.is_app_role() RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (
        SELECT 1 FROM dbos_agents.app_roles r
        WHERE pg_catalog.pg_has_role(current_user, r.role_name, 'MEMBER')
    )
$$;

CREATE FUNCTION dbos_agents.visible(row_user text, row_tenant text) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT NOT dbos_agents.is_app_role() OR (
        row_user IS NOT NULL
        AND row_user = nullif(current_setting('dbos_agents.user_id', true), '')
        AND (
            nullif(current_setting('dbos_agents.tenant_id', true), '') IS NULL
            OR row_tenant = nullif(current_setting('dbos_agents.tenant_id', true), '')
        )
    )
$$;

CREATE FUNCTION dbos_agents.session_visible(sid text) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT NOT dbos_agents.is_app_role() OR EXISTS (
        SELECT 1 FROM dbos_agents.sessions s
        WHERE s.id = sid AND dbos_agents.visible(s.user_id, s.tenant_id)
    )
$$;

ALTER TABLE dbos_agents.sessions ENABLE ROW LEVEL SECURITY;
CREATE POLICY sessions_read ON dbos_agents.sessions FOR SELECT
    USING (dbos_agents.visible(user_id, tenant_id));
CREATE POLICY sessions_create ON dbos_agents.sessions FOR INSERT
    WITH CHECK (dbos_agents.visible(user_id, tenant_id));
CREATE POLICY sessions_update ON dbos_agents.sessions FOR UPDATE
    USING (dbos_agents.visible(user_id, tenant_id))
    WITH CHECK (dbos_agents.visible(user_id, tenant_id));
CREATE POLICY sessions_service_delete ON dbos_agents.sessions FOR DELETE
    USING (NOT dbos_agents.is_app_role());

ALTER TABLE dbos_agents.messages ENABLE ROW LEVEL SECURITY;
CREATE POLICY messages_read ON dbos_agents.messages FOR SELECT
    USING (dbos_agents.visible(user_id, tenant_id));
CREATE POLICY messages_service ON dbos_agents.messages FOR ALL
    USING (NOT dbos_agents.is_app_role()) WITH CHECK (NOT dbos_agents.is_app_role());

ALTER TABLE dbos_agents.pending_calls ENABLE ROW LEVEL SECURITY;
CREATE POLICY pending_read ON dbos_agents.pending_calls FOR SELECT
    USING (dbos_agents.visible(user_id, tenant_id));
CREATE POLICY pending_service ON dbos_agents.pending_calls FOR ALL
    USING (NOT dbos_agents.is_app_role()) WITH CHECK (NOT dbos_agents.is_app_role());

ALTER TABLE dbos_agents.tool_calls ENABLE ROW LEVEL SECURITY;
CREATE POLICY tool_calls_read ON dbos_agents.tool_calls FOR SELECT
    USING (dbos_agents.session_visible(session_id));
CREATE POLICY tool_calls_service ON dbos_agents.tool_calls FOR ALL
    USING (NOT dbos_agents.is_app_role()) WITH CHECK (NOT dbos_agents.is_app_role());

ALTER TABLE dbos_agents.usage ENABLE ROW LEVEL SECURITY;
CREATE POLICY usage_read ON dbos_agents.usage FOR SELECT
    USING (dbos_agents.session_visible(session_id));
CREATE POLICY usage_service ON dbos_agents.usage FOR ALL
    USING (NOT dbos_agents.is_app_role()) WITH CHECK (NOT dbos_agents.is_app_role());

ALTER TABLE dbos_agents.workers ENABLE ROW LEVEL SECURITY;
CREATE POLICY workers_service ON dbos_agents.workers FOR ALL
    USING (NOT dbos_agents.is_app_role()) WITH CHECK (NOT dbos_agents.is_app_role());

ALTER TABLE dbos_agents.schema_migrations ENABLE ROW LEVEL SECURITY;
CREATE POLICY migrations_service ON dbos_agents.schema_migrations FOR ALL
    USING (NOT dbos_agents.is_app_role()) WITH CHECK (NOT dbos_agents.is_app_role());
