// Package sqldb opens the SQL databases idmint keeps state in — SQLite (the
// embedded default, pure Go), PostgreSQL (pgx) and MySQL/MariaDB
// (go-sql-driver) — from one URL form, describes the small differences
// between their SQL dialects, and applies embedded migrations.
//
// URLs:
//
//	sqlite:///var/lib/idmint/idmint.db     absolute path
//	sqlite://idmint.db                     path relative to the working directory
//	postgres://user:pass@host:5432/db?sslmode=disable   (also postgresql://)
//	mysql://user:pass@host:3306/db?tls=true
//	user:pass@tcp(host:3306)/db            go-sql-driver DSN, taken as is
//
// Errors name the URL part that is wrong and never contain a password.
package sqldb
