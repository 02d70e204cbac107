-- High-water marks of ID spaces kept outside the stores that issue them
-- (package witness): a number at or below a space's mark was served.
CREATE TABLE IF NOT EXISTS idmint_witness (
  space VARCHAR(191) NOT NULL PRIMARY KEY,
  mark BIGINT NOT NULL
);
