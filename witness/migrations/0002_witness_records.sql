-- Records written once (package witness, Recorder): a region's identity
-- beside the coordinator's worker table, a region's claim of its index in
-- a registry database.
CREATE TABLE IF NOT EXISTS idmint_records (
  name VARCHAR(191) NOT NULL PRIMARY KEY,
  value VARCHAR(1024) NOT NULL
);
