package instagram_test

import (
	"fmt"

	"github.com/idmint/idmint/instagram"
)

// The SQL `idmint sql instagram --schema shard_5 --shard 5` prints.
func ExampleRender() {
	sql, err := instagram.Render(instagram.Options{Schema: "shard_5", Shard: 5})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(sql)
	_, err = instagram.Render(instagram.Options{Schema: "shard_5", Shard: 8192})
	fmt.Println(err)
	// Output:
	// -- Instagram-style IDs for shard 5 in schema shard_5, rendered by idmint.
	// -- Layout: 41-bit ms since 2011-08-24T21:07:01.721Z (1314220021721) | 13-bit shard | 10-bit nextval % 1024.
	// -- After "Sharding & IDs at Instagram", Instagram Engineering, 2011.
	// -- Unique while the shard issues at most 1024 IDs per millisecond and the
	// -- server clock does not step back; ordered by millisecond, not strictly.
	// -- IDs stay positive until 2046-06-27T17:00:49.497Z; next_id() raises from then on.
	// CREATE SCHEMA IF NOT EXISTS "shard_5";
	// CREATE SEQUENCE IF NOT EXISTS "shard_5"."table_id_seq";
	// CREATE OR REPLACE FUNCTION "shard_5"."next_id"(OUT result bigint) AS $idmint$
	// DECLARE
	//     our_epoch bigint := 1314220021721;
	//     seq_id bigint;
	//     now_millis bigint;
	//     shard_id int := 5;
	// BEGIN
	//     SELECT nextval('"shard_5"."table_id_seq"') % 1024 INTO seq_id;
	//     SELECT FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) INTO now_millis;
	//     -- idmint: the 41-bit time field's top bit is the bigint sign bit;
	//     -- refuse a time that would make the ID negative or precede the epoch.
	//     IF now_millis < our_epoch OR now_millis - our_epoch >= (1::bigint << 40) THEN
	//         RAISE EXCEPTION 'next_id: clock % ms is outside [epoch %, epoch + 2^40)', now_millis, our_epoch;
	//     END IF;
	//     result := (now_millis - our_epoch) << 23;
	//     result := result | (shard_id << 10);
	//     result := result | (seq_id);
	// END;
	// $idmint$ LANGUAGE plpgsql VOLATILE;
	// instagram: shard "8192" does not fit 13 bits (0..8191)
}
