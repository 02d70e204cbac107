-- High-water marks of Redis counters: no ID above mark was ever returned.
CREATE TABLE IF NOT EXISTS idmint_redis_marks (
  name VARCHAR(191) NOT NULL PRIMARY KEY,
  mark BIGINT NOT NULL
);
