-- uid-generator's WORKER_NODE (github.com/baidu/uid-generator,
-- src/main/scripts/WORKER_NODE.sql: ID, HOST_NAME, PORT, TYPE, LAUNCH_DATE,
-- MODIFIED, CREATED), with three changes so worker IDs are recycled instead
-- of burned one per restart, and handovers are fenced:
--   ID is chosen by idmint (the lowest free or stale one), not AUTO_INCREMENT;
--   GENERATION grows on every acquisition of the row, and every write by a
--   holder is conditional on it;
--   HEARTBEAT_MS / TTL_MS (database clock, ms since the Unix epoch) say when
--   the row goes stale; HORIZON_NS is the highest time its holder may stamp.
CREATE TABLE IF NOT EXISTS WORKER_NODE (
    ID          BIGINT      NOT NULL PRIMARY KEY,
    HOST_NAME   VARCHAR(64) NOT NULL,
    PORT        VARCHAR(64) NOT NULL,
    TYPE        INT         NOT NULL,
    LAUNCH_DATE DATE        NOT NULL,
    MODIFIED    TIMESTAMP   NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CREATED     TIMESTAMP   NOT NULL DEFAULT CURRENT_TIMESTAMP,
    GENERATION  BIGINT      NOT NULL,
    HEARTBEAT_MS BIGINT     NOT NULL,
    TTL_MS      BIGINT      NOT NULL,
    HORIZON_NS  BIGINT      NOT NULL DEFAULT 0
);
