package idparts_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/idmint/idmint/idparts"
)

// The object /v1/decode answers and `idmint decode --json` prints for a
// Twitter-layout ID: the worker is the node, the datacenter an extra field.
func ExampleParts_Answer() {
	p := idparts.Parts{Layout: "twitter", Time: time.UnixMilli(1539202764211), Node: 27, Sequence: 0,
		Extra: map[string]string{"datacenter": "10"}}
	b, _ := json.Marshal(p.Answer("1050118621198921728"))
	fmt.Println(string(b))
	b, _ = json.Marshal(idparts.Parts{Layout: "uuid", Extra: map[string]string{"version": "4"}}.Answer("d130938c-a285-4c46-b2c8-171f4b9d10f7"))
	fmt.Println(string(b))
	// Output:
	// {"id":"1050118621198921728","layout":"twitter","time":"2018-10-10T20:19:24.211Z","unix_ms":"1539202764211","node":27,"sequence":0,"extra":{"datacenter":"10"}}
	// {"id":"d130938c-a285-4c46-b2c8-171f4b9d10f7","layout":"uuid","node":0,"sequence":0,"extra":{"version":"4"}}
}
