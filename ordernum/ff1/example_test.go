package ff1_test

import (
	"encoding/hex"
	"fmt"

	"github.com/idmint/idmint/ordernum/ff1"
)

// NIST FF1 sample 1 (AES-128, radix 10, empty tweak).
func ExampleCipher_Encrypt() {
	key, _ := hex.DecodeString("2B7E151628AED2A6ABF7158809CF4F3C")
	c, _ := ff1.New(key, 10)
	x := []uint16{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	_ = c.Encrypt(x, x, nil)
	fmt.Println(x)
	_ = c.Decrypt(x, x, nil)
	fmt.Println(x)
	// Output:
	// [2 4 3 3 4 7 7 4 8 4]
	// [0 1 2 3 4 5 6 7 8 9]
}

// The same sample on integers: 0123456789 → 2433477484.
func ExampleDomain() {
	key, _ := hex.DecodeString("2B7E151628AED2A6ABF7158809CF4F3C")
	c, _ := ff1.New(key, 10)
	d, _ := c.Domain(10, 0)
	y, _ := d.Encrypt(123456789, nil)
	x, _ := d.Decrypt(y, nil)
	fmt.Println(y, x, d.Max())
	_, err := d.Encrypt(10_000_000_000, nil)
	fmt.Println(err)
	// Output:
	// 2433477484 123456789 9999999999
	// ff1: numeral out of range: value 10000000000 exceeds the domain maximum 9999999999
}
