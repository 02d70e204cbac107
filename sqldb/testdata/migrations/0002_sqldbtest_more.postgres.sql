INSERT INTO things (name, n) VALUES ('two', 22);
