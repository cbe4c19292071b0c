-- The two databases and roles saber's pods need, on your PostgreSQL server (a managed one is
-- best). Run once as a superuser, with the passwords you put in the Secrets of deploy/README.md:
--   psql "host=postgres.saber.svc.cluster.local user=postgres" \
--     -v dagster_pw="'…'" -v saber_pw="'…'" -f deploy/k8s/postgres-init.sql
-- `dagster`: Dagster's instance (run history, schedules, the run queue, pool slots), the chart's
--            postgresql.postgresqlUsername / postgresqlDatabase, password in saber-dagster-postgresql.
-- `saber`:   saber's stores (LLM cache, embedding cache, judgments), the DSN in saber-stores.
CREATE ROLE dagster LOGIN PASSWORD :dagster_pw;
CREATE DATABASE dagster OWNER dagster;
CREATE ROLE saber LOGIN PASSWORD :saber_pw;
CREATE DATABASE saber OWNER saber;
