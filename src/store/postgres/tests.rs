//! What only the Postgres store has: leases across processes and machines (two pools
//! racing, expiry, heartbeats), its schema version, and URLs without passwords.
