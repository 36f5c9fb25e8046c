// Package ring holds the lock-free rings and the fixed packet-buffer pool:
// the only way shards exchange packets. Built in a later issue (see
// docs/ARCHITECTURE.md).
package ring
