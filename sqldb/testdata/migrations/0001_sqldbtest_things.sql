-- a generic migration
CREATE TABLE IF NOT EXISTS things (
  name VARCHAR(64) NOT NULL PRIMARY KEY,
  n BIGINT NOT NULL
);
INSERT INTO things (name, n) VALUES ('one', 1);
