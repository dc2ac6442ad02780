package login

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Token is the token endpoint's answer (RFC 6749 §5.1 as the contract shapes
// it: no expires_in, no refresh_token).
type Token struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	Scope       string `json:"scope"`
}

// Exchange posts the code to <endpoint>/cocoonbox.oauth/token
// (grant_type=authorization_code with the client_id, redirect_uri and
// code_verifier, RFC 6749 §4.1.3 and RFC 7636 §4.5). A refusal is an *OAuthError.
func Exchange(ctx context.Context, hc *http.Client, endpoint, clientID string, res Result) (Token, error) {
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {res.Code},
		"client_id":     {clientID},
		"redirect_uri":  {res.RedirectURI},
		"code_verifier": {res.CodeVerifier},
	}
	var tok Token
	if err := postForm(ctx, hc, strings.TrimSuffix(endpoint, "/")+"/cocoonbox.oauth/token", form, &tok); err != nil {
		return Token{}, fmt.Errorf("exchange the code for a token: %w", err)
	}
	if tok.AccessToken == "" || !strings.EqualFold(tok.TokenType, "Bearer") {
		return Token{}, fmt.Errorf("exchange the code for a token: the answer has no Bearer token")
	}
	return tok, nil
}

// Revoke posts the token to <endpoint>/cocoonbox.oauth/revoke (RFC 7009
// §2.1); the server answers 200 also for a token it does not know.
func Revoke(ctx context.Context, hc *http.Client, endpoint, clientID, token string) error {
	form := url.Values{"token": {token}, "client_id": {clientID}}
	if err := postForm(ctx, hc, strings.TrimSuffix(endpoint, "/")+"/cocoonbox.oauth/revoke", form, nil); err != nil {
		return fmt.Errorf("revoke the token: %w", err)
	}
	return nil
}

func postForm(ctx context.Context, hc *http.Client, u string, form url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, "POST", u, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		if json.NewDecoder(resp.Body).Decode(&e) == nil && e.Error != "" {
			return &OAuthError{Code: e.Error, Description: e.Description}
		}
		return fmt.Errorf("%s answered %s", u, resp.Status)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s: the answer is not JSON: %w", u, err)
	}
	return nil
}
