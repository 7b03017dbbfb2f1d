package api

// Reads are served by whichever coordinator member a client reaches, from
// the state that member has applied; a follower trails the leader by up to
// a heartbeat (longer right after it restarts). So that a client never
// reads state older than what it has already seen — its own write
// forwarded to the leader, or a newer member it reached before failing
// over — every answer names the Raft index of the state it reflects
// (IndexHeader), the client (package api/client) remembers the highest, and sends it with every
// request (MinIndexHeader). A member behind that index waits briefly to
// catch up, then answers 503 lagging, and the client tries the next
// endpoint.
const (
	// IndexHeader is the Raft index of the state an answer reflects.
	IndexHeader = "X-Molt-Index"
	// MinIndexHeader is the lowest index the client accepts an answer at.
	MinIndexHeader = "X-Molt-Min-Index"
)
