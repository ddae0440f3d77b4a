package oidcprovider

import (
	"context"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"slices"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

const (
	// loginRequestParam carries the auth request ID to the form and back.
	loginRequestParam = "authRequestID"
	loggedOutPath     = "/logged-out"
)

// The element ids are an interface: browser tests fill #username and #password,
// click #submit and read #error.
var loginPage = template.Must(template.New("login").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in</title>
</head>
<body>
<main>
<h1>Sign in</h1>
<p>to continue to <strong id="client">{{.ClientID}}</strong></p>
{{if .Error}}<p id="error" role="alert">{{.Error}}</p>{{end}}
<form id="login" method="post" action="{{.Action}}">
<input type="hidden" name="` + loginRequestParam + `" value="{{.ID}}">
<p><label for="username">Username</label>
<input id="username" name="username" type="text" autocomplete="username" value="{{.Username}}" required autofocus></p>
<p><label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required></p>
<p><button id="submit" type="submit">Sign in</button></p>
</form>
</main>
</body>
</html>
`))

type loginData struct {
	ID, ClientID, Action, Username, Error string
}

// loginUI is the username/password form the OP redirects to (Client.LoginURL).
type loginUI struct {
	storage  *storage
	op       *op.Provider
	callback func(context.Context, string) string
	action   string
	logger   *slog.Logger
}

func (ui *loginUI) show(w http.ResponseWriter, r *http.Request) {
	id := r.FormValue(loginRequestParam)
	a, err := ui.storage.AuthRequestByID(r.Context(), id)
	if err != nil {
		http.Error(w, "unknown or expired sign-in request; start again at the application", http.StatusBadRequest)
		return
	}
	// There is no login session to reuse, so prompt=none can never succeed.
	if req, ok := a.(*authRequest); ok && slices.Contains(req.prompt, oidc.PromptNone) {
		_ = ui.storage.DeleteAuthRequest(r.Context(), id)
		op.AuthRequestError(w, r, req, oidc.ErrLoginRequired(), ui.op)
		return
	}
	ui.render(w, loginData{ID: id, ClientID: a.GetClientID(), Action: ui.action})
}

func (ui *loginUI) submit(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "cannot parse form", http.StatusBadRequest)
		return
	}
	id, username := r.PostForm.Get(loginRequestParam), r.PostForm.Get("username")
	a, err := ui.storage.AuthRequestByID(r.Context(), id)
	if err != nil {
		http.Error(w, "unknown or expired sign-in request; start again at the application", http.StatusBadRequest)
		return
	}
	err = ui.storage.checkLogin(id, username, r.PostForm.Get("password"))
	switch {
	case errors.Is(err, errBadCredentials):
		ui.logger.Info("sign-in rejected", "username", username, "client", a.GetClientID())
		ui.render(w, loginData{ID: id, ClientID: a.GetClientID(), Action: ui.action,
			Username: username, Error: err.Error()})
		return
	case err != nil:
		http.Error(w, "unknown or expired sign-in request; start again at the application", http.StatusBadRequest)
		return
	}
	ui.logger.Info("signed in", "username", username, "client", a.GetClientID())
	// 303: the browser follows with a GET to the OP's callback, which issues the code.
	http.Redirect(w, r, ui.callback(r.Context(), id), http.StatusSeeOther)
}

func (ui *loginUI) render(w http.ResponseWriter, d loginData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := loginPage.Execute(w, d); err != nil {
		ui.logger.Error("render login form", "error", err)
	}
}

// loggedOut is where end_session lands without a post_logout_redirect_uri.
func loggedOut(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Signed out</title></head>` +
		`<body><h1 id="signed-out">You are signed out.</h1></body></html>`))
}
