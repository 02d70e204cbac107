package ordernum_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/idmint/idmint/ordernum"
)

// A demo key; real keys come from a file or the environment (ParseKey).
const demoKey = "000102030405060708090a0b0c0d0e0f"

func Example() {
	f, err := ordernum.ParseFormat("length=18,prefix=88,date=yyMMdd,version")
	if err != nil {
		panic(err)
	}
	key, err := ordernum.ParseKey(3, demoKey)
	if err != nil {
		panic(err)
	}
	c, err := ordernum.New(f, key)
	if err != nil {
		panic(err)
	}
	day := time.Date(2025, 8, 17, 10, 0, 0, 0, time.UTC)
	for seq := range uint64(3) {
		s, _ := c.Encode(seq, day)
		fmt.Println(s)
	}
	p, _ := c.Decode("883-250817-5363-7579-2") // hyphens are ignored
	fmt.Println(p.Seq, p.Date.Format("2006-01-02"), p.Version)
	fmt.Println(f.Capacity(), "per day")
	// Output:
	// 883250817536375792
	// 883250817767779695
	// 883250817343677352
	// 0 2025-08-17 3
	// 100000000 per day
}

func ExampleFormat_Validate() {
	f := ordernum.MustParseFormat("alphabet=base32,length=13")
	fmt.Println(f.Validate("P8NC-Q13P-D9ZK-$"))
	err := f.Validate("P8NC-Q13P-D9ZX-$") // K mistyped as X
	fmt.Println(err)
	fmt.Println(errors.Is(err, ordernum.ErrCheck))
	// Output:
	// <nil>
	// ordernum: number "P8NC-Q13P-D9ZX-$": check character '$' does not match (mod37): mistyped, or not an order number of this format
	// true
}

func ExampleFormat_Normalize() {
	f := ordernum.MustParseFormat("alphabet=base32,length=13")
	s, err := f.Normalize("p8nc-ql3p-d9zk-$") // lower case, hyphens, l for 1
	fmt.Println(s, err)
	// Output:
	// P8NCQ13PD9ZK$ <nil>
}

func ExampleCodec_Encode_capacity() {
	f := ordernum.MustParseFormat("length=7") // 6-digit body: 1,000,000 numbers
	key, _ := ordernum.ParseKey(0, demoKey)
	c, _ := ordernum.New(f, key)
	fmt.Println(f.NearCapacity(799_998), f.NearCapacity(799_999))
	_, err := c.Encode(1_000_000, time.Time{})
	fmt.Println(err)
	// Output:
	// false true
	// ordernum: seq "1000000": the format alphabet=decimal,length=7,check=damm has room for 1000000 order numbers (sequence 0 to 999999)
}

func ExampleNewFormat_error() {
	_, err := ordernum.NewFormat(ordernum.Config{Alphabet: ordernum.Decimal, Length: 6})
	fmt.Println(err)
	// Output:
	// ordernum: length "6": leaves a body of 5 decimal characters, a domain of 100000 values, below FF1's minimum of 1000000 (NIST SP 800-38G Rev. 1); lengthen it by 1
}

func ExampleParseKey() {
	key, err := ordernum.ParseKey(2, "AAECAwQFBgcICQoLDA0ODw==")
	fmt.Println(key, err)
	// Output:
	// ordernum.Key{version: 2, AES-128, material redacted} <nil>
}

func ExampleOpaque() {
	key, _ := ordernum.ParseKey(0, demoKey)
	o, _ := ordernum.NewOpaque(key, 63, "user")
	for id := int64(1_900_000_000_000_000_000); id < 1_900_000_000_000_000_003; id++ {
		x, _ := o.EncodeInt64(id)
		back, _ := o.DecodeInt64(x)
		fmt.Println(id, "->", x, "->", back)
	}
	// Output:
	// 1900000000000000000 -> 7344677660025736214 -> 1900000000000000000
	// 1900000000000000001 -> 8593028320261675071 -> 1900000000000000001
	// 1900000000000000002 -> 1221611122468650695 -> 1900000000000000002
}
