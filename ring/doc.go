// Package ring holds the lock-free rings and the fixed packet-buffer pool:
// the only way shards exchange packets.
//
// A shard owns a Pool; its packets travel to another shard through an SPSC
// ring (one per ordered pair of shards, so every ring has one producer and
// one consumer and needs no CAS), and come back to the owner through a
// return ring. A consumer that runs out of work sleeps on a Waker (an
// eventfd on Linux) that producers only write when it is actually asleep, so
// a busy consumer costs producers one atomic load per batch.
package ring
