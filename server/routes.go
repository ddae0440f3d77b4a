package server

import (
	"context"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/identity"
	"github.com/stxfaucet/faucet-operator/server/settings"
	"github.com/stxfaucet/faucet-operator/server/web"
)

// Route labels of requests no route matched.
const routeUnmatched = "unmatched"

// addRoutes registers every route. Each path gets its method-specific
// handlers, then a method-less fallback that answers a CORS preflight or a
// JSON 405 with Allow; the ServeMux's own 404 and 405 answers are plain text,
// so they are never reached.
func (s *server) addRoutes(mux *http.ServeMux) {
	page := web.Handler()
	// Hiro-compatible API: v1 and v3 drip routes for every asset the
	// faucet drips, and for the incumbent's assets this one does not drip
	// a 403, as the incumbent answers when one is off.
	var routes []route
	for _, a := range s.assets {
		routes = append(routes,
			route{http.MethodPost, "/extended/v1/faucets/" + string(a.name), deprecated(useV3(a.name), s.handleDrip(a))},
			route{http.MethodPost, "/extended/v3/faucets/" + string(a.name), s.handleDripV3(a)})
	}
	for _, name := range settings.IncumbentAssets {
		if a := faucet.Asset(name); !s.configured(a) {
			routes = append(routes,
				route{http.MethodPost, "/extended/v1/faucets/" + name, deprecated(useV3(a), s.handleOff(a, false))},
				route{http.MethodPost, "/extended/v3/faucets/" + name, s.handleOff(a, true)})
		}
	}
	for _, kindRoutes := range routeRegistry {
		routes = append(routes, kindRoutes(s)...)
	}
	routes = append(routes, []route{
		{http.MethodGet, "/extended/v1/status", http.HandlerFunc(s.handleStatus)},
		// The incumbent moved status to /extended and redirects the old path;
		// we serve the same body on all three.
		{http.MethodGet, "/extended", http.HandlerFunc(s.handleStatus)},
		{http.MethodGet, "/extended/{$}", http.HandlerFunc(s.handleStatus)},
		// The web page and the endpoints it reads (ours, under /faucet/v1/).
		{http.MethodGet, "/{$}", page},
		{http.MethodGet, "/assets/{file}", page},
		{http.MethodGet, pathInfo, http.HandlerFunc(s.handleInfo)},
		{http.MethodPost, pathChallenge, http.HandlerFunc(s.handleChallenge)},
		{http.MethodGet, pathDrip, http.HandlerFunc(s.handleDripStatus)},
		{http.MethodGet, pathEligibility, http.HandlerFunc(s.handleEligibility)},
		// Operations.
		{http.MethodGet, "/healthz", http.HandlerFunc(handleHealthz)},
		{http.MethodGet, "/readyz", http.HandlerFunc(s.handleReadyz)},
		{http.MethodGet, "/metrics", s.metrics.Handler()},
	}...)
	if si := s.cfg.SignIn; si != nil {
		routes = append(routes,
			route{http.MethodGet, identity.PathLogin, http.HandlerFunc(si.Login)},
			route{http.MethodGet, identity.PathCallback, http.HandlerFunc(si.Callback)},
			route{http.MethodPost, identity.PathLogout, http.HandlerFunc(si.Logout)},
			route{http.MethodGet, identity.PathSession, http.HandlerFunc(s.handleSession)})
	}
	if s.cfg.MCP {
		mcp := mcpHandler(s)
		routes = append(routes, route{http.MethodPost, pathMCP, mcp}, route{http.MethodGet, pathMCP, mcp}, route{http.MethodDelete, pathMCP, mcp})
	}
	allowed := map[string][]string{} // path → methods, in registration order
	var paths []string
	for _, rt := range routes {
		s.handle(mux, rt.method+" "+rt.path, rt.path, rt.h)
		if _, ok := allowed[rt.path]; !ok {
			paths = append(paths, rt.path)
		}
		allowed[rt.path] = append(allowed[rt.path], rt.method)
		if rt.method == http.MethodGet {
			// ServeMux serves HEAD with GET handlers.
			allowed[rt.path] = append(allowed[rt.path], http.MethodHead)
		}
	}
	for _, p := range paths {
		methods := append(slices.Clone(allowed[p]), http.MethodOptions)
		s.handle(mux, p, p, otherMethod(strings.Join(methods, ", ")))
	}
	// Any other asset: 404 naming the ones the faucet drips. Method-less,
	// so the asset routes above stay more specific than it.
	for _, p := range []string{"/extended/v1/faucets/{asset}", "/extended/v3/faucets/{asset}"} {
		s.handle(mux, p, p, http.HandlerFunc(s.handleUnknownAsset))
	}
	s.handle(mux, "/", routeUnmatched, http.HandlerFunc(handleNotFound))
}

// deprecated marks every answer of h, errors included, with the Warning
// the incumbent sends on its v1 faucet routes, so clients learn of v3.
func deprecated(msg string, h http.Handler) http.Handler {
	warning := `299 - "Deprecated: ` + msg + `"`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Warning", warning)
		h.ServeHTTP(w, r)
	})
}

// useV3 is the deprecation message of asset's v1 drip route: the
// incumbent's first sentence, then what it means for a client.
func useV3(asset faucet.Asset) string {
	return "Use POST /extended/v3/faucets/" + string(asset) + " instead. The v1 route keeps working for existing clients and gets no new options."
}

// route is one method and path the server answers.
type route struct {
	method, path string
	h            http.Handler
}

// handleOff answers the drips of an asset the faucet does not drip now.
func (s *server) handleOff(asset faucet.Asset, v3 bool) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		s.refuseOff(w, asset, v3)
	}
}

// handle registers h under pattern and labels its requests with route for
// logs and metrics (the pattern, never the raw path, to bound cardinality).
func (s *server) handle(mux *http.ServeMux, pattern, route string, h http.Handler) {
	mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ri := infoFrom(r.Context()); ri != nil {
			ri.route = route
		}
		h.ServeHTTP(w, r)
	}))
}

// otherMethod answers any method a path does not serve: 204 to a CORS
// preflight (OPTIONS), else 405. Both carry Allow.
func otherMethod(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Allow", allow)
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", allow)
			// Echo what the browser asks for: with a wildcard origin and no
			// credentials there is nothing to protect, and a fixed list
			// breaks clients that add their own headers.
			if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
				h.Set("Access-Control-Allow-Headers", req)
			} else {
				h.Set("Access-Control-Allow-Headers", "Content-Type")
			}
			h.Add("Vary", "Access-Control-Request-Headers")
			h.Set("Access-Control-Max-Age", "86400")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		writeError(w, http.StatusMethodNotAllowed, errorBody{
			Error:  "method not allowed",
			Reason: "method_not_allowed",
			Detail: "allowed: " + allow,
		})
	}
}

func handleNotFound(w http.ResponseWriter, _ *http.Request) {
	writeError(w, http.StatusNotFound, errorBody{Error: "not found"})
}

// reqInfo is filled in while a request is served and read by the access log
// and metrics once it is done.
type reqInfo struct {
	route    string
	clientIP netip.Addr
}

type reqInfoKey struct{}

func infoFrom(ctx context.Context) *reqInfo {
	ri, _ := ctx.Value(reqInfoKey{}).(*reqInfo)
	return ri
}
