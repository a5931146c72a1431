// Package redconbench measures what parsing the Redis protocol with
// tidwall/redcon, the most used Go RESP server library, would cost kvring's
// SET path: redcon reads each command whole into its own buffer, and the
// value must then be copied into the shared-memory blob the write
// publishes. Its benchmark parses the same stream as
// node/internal/resp's BenchmarkReadSetValue, which reads each value
// straight into its blob. A module of its own, so kvring does not depend on
// redcon.
package redconbench
