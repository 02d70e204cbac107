-- Leaf's leaf_alloc table (Meituan-Dianping/Leaf scripts/leaf_alloc.sql) in
-- portable SQL for PostgreSQL and SQLite. There is no ON UPDATE clause:
-- idmint sets update_time in every UPDATE.
CREATE TABLE IF NOT EXISTS leaf_alloc (
  biz_tag VARCHAR(128) NOT NULL DEFAULT '',
  max_id BIGINT NOT NULL DEFAULT 1,
  step INTEGER NOT NULL,
  description VARCHAR(256) DEFAULT NULL,
  update_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
);
