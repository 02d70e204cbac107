module github.com/idmint/idmint/bench

go 1.26.0

require (
	github.com/bwmarrin/snowflake v0.3.0
	github.com/google/uuid v1.6.0
	github.com/idmint/idmint v0.0.0
	github.com/oklog/ulid/v2 v2.1.2
	github.com/rs/xid v1.6.0
	github.com/segmentio/ksuid v1.0.4
	github.com/sony/sonyflake v1.2.0
)

replace github.com/idmint/idmint => ../
