// Package javatest tests the Java client in clients/java from Go: it runs
// the client's JUnit tests with Maven, and drives the client against
// three real `idmint serve` processes on PostgreSQL and etcd while it
// kills and pauses them. It has no code of its own outside its tests.
package javatest
