package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/moltproject/molt/api"
)

// defaultCatchUp is how long a member behind a client's index waits to
// catch up before answering 503 lagging (the client then tries another
// member). A healthy follower trails by one heartbeat, well under it.
const defaultCatchUp = 2 * time.Second

// errLagging is a read refused because this member has not yet applied the
// state the client has already seen or, with credential, the leader's read
// index an operator's credential is judged at (fresh.go).
type errLagging struct {
	applied, want uint64
	credential    bool
}

func (e errLagging) Error() string {
	if e.credential {
		return fmt.Sprintf("this member has applied index %d, the leader %d: an API token or web session is not judged by older state; ask another member", e.applied, e.want)
	}
	return fmt.Sprintf("this member has applied index %d, the client has seen %d; ask another member", e.applied, e.want)
}

// rule names what the refusal upholds.
func (e errLagging) rule() string {
	if e.credential {
		return ruleFresh
	}
	return "read-your-writes"
}

// consistentIndex makes reads monotonic for a client (see
// api/consistency.go): a read naming a minimum index waits until this
// member has applied it, and every answer names the index it reflects.
// Answers forwarded from the leader keep the leader's index.
func (h *handlers) consistentIndex(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			if err := h.catchUp(r); err != nil {
				writeProblem(w, r, err)
				return
			}
		}
		next.ServeHTTP(&indexWriter{ResponseWriter: w, leader: h.leader}, r)
	})
}

// behind reports whether this member has not yet applied the index the
// request names (api.MinIndexHeader).
func (h *handlers) behind(r *http.Request) bool {
	want, err := strconv.ParseUint(r.Header.Get(api.MinIndexHeader), 10, 64)
	return err == nil && h.leader.AppliedIndex() < want
}

// catchUp waits, up to Config.CatchUp, until this member has applied the
// index the request names, and returns errLagging if it has not by then.
func (h *handlers) catchUp(r *http.Request) error {
	want, err := strconv.ParseUint(r.Header.Get(api.MinIndexHeader), 10, 64)
	if err != nil || h.leader.AppliedIndex() >= want {
		return nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.CatchUp)
	defer cancel()
	if h.leader.WaitApplied(ctx, want) != nil {
		return errLagging{applied: h.leader.AppliedIndex(), want: want}
	}
	return nil
}

// indexWriter sets IndexHeader when the answer's header is written, after
// the handler applied its write, unless a forwarded answer carries the
// leader's.
type indexWriter struct {
	http.ResponseWriter
	leader Leadership
	wrote  bool
}

func (w *indexWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if w.Header().Get(api.IndexHeader) == "" {
			w.Header().Set(api.IndexHeader, strconv.FormatUint(w.leader.AppliedIndex(), 10))
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *indexWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets long polls and the reverse proxy flush through the wrapper.
func (w *indexWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *indexWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
