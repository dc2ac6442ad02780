// Package gwtest is a stand-in for gw, the product's model gateway (gw is
// not ours; Contract: Model usage), shaped as LiteLLM proxy is:
//
//   - the OpenAI API under /v1: GET /v1/models and POST
//     /v1/chat/completions, which answers a canned completion with its
//     token counts (usage.prompt_tokens: the words of the messages;
//     completion_tokens: CompletionTokens), for a virtual key in
//     Authorization: Bearer;
//   - per-key metering: each call's cost (Model's prices per token, in
//     micro-dollars) is counted to the key's user_id, model and UTC day;
//   - per-key daily budgets: a key whose user has spent its max_budget
//     (USD) today gets 400 budget_exceeded before the call, as LiteLLM's
//     "Budget has been exceeded!"; the budget resets at 00:00 UTC
//     (budget_duration "1d");
//   - the admin API, behind the master key: POST /key/generate,
//     /key/update, /key/{key}/regenerate, /key/delete, GET /key/info and
//     GET /user/daily/activity (LiteLLM's daily spend breakdown: per day,
//     metrics and a breakdown by model).
//
// Every error is OpenAI's body: {"error":{"message","type","param","code"}}.
package gwtest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"time"
)

// Model is a canned model with its prices in micro-dollars per token.
type Model struct {
	ID               string
	PromptMicros     int64
	CompletionMicros int64
}

// Models are the stand-in's models: the image's MODEL_MAIN and
// MODEL_COMPUTER (agent.env).
var Models = []Model{
	{ID: "deepseek/deepseek-v4.1-flash", PromptMicros: 1, CompletionMicros: 4},
	{ID: "anthropic/claude-sonnet-5", PromptMicros: 3, CompletionMicros: 15},
}

// CompletionTokens is every canned completion's length in tokens.
const CompletionTokens = 7

// Metrics are LiteLLM's SpendMetrics: spend in USD, the token counts and
// the requests answered.
type Metrics struct {
	Spend            float64 `json:"spend"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	TotalTokens      int64   `json:"total_tokens"`
	APIRequests      int64   `json:"api_requests"`
}

// Call is one call the OpenAI API saw: the key as sent (Bearer's value)
// and the path.
type Call struct {
	Key  string
	Path string
}

type key struct {
	token     string // the key's SHA-256, hex: LiteLLM's token
	userID    string
	alias     string
	maxMicros int64 // <0: no budget
}

type dayKey struct{ user, day, model string }

type meter struct {
	micros             int64
	prompt, completion int64
	requests           int64
}

// Server is the stand-in on loopback. Its zero budget is none.
type Server struct {
	// URL is the base: the OpenAI API is URL+"/v1", the admin API beside it.
	URL string
	// MasterKey is the admin API's bearer.
	MasterKey string

	srv   *httptest.Server
	mu    sync.Mutex
	now   func() time.Time
	keys  map[string]*key // by value
	spend map[dayKey]*meter
	calls []Call
	// beforeDelete, when set, is called with a key delete's keys before
	// they go (BeforeDelete).
	beforeDelete func(keys []string)
}

// BeforeDelete has f called with the keys of every key delete the admin
// API takes, before they go: a test reads then what the api holds at the
// moment gw refuses a key.
func (s *Server) BeforeDelete(f func(keys []string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.beforeDelete = f
}

// New starts a stand-in on loopback; Close stops it.
func New() *Server {
	s := &Server{MasterKey: "sk-master-" + random(), now: time.Now, keys: map[string]*key{}, spend: map[dayKey]*meter{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /v1/chat/completions", s.completions)
	mux.HandleFunc("POST /key/generate", s.admin(s.generate))
	mux.HandleFunc("POST /key/update", s.admin(s.update))
	mux.HandleFunc("POST /key/{key}/regenerate", s.admin(s.regenerate))
	mux.HandleFunc("POST /key/delete", s.admin(s.deleteKeys))
	mux.HandleFunc("GET /key/info", s.admin(s.info))
	mux.HandleFunc("GET /user/daily/activity", s.admin(s.activity))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, "not_found_error", "404", "no route "+r.Method+" "+r.URL.Path)
	})
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// SetClock sets the clock days are counted by (time.Now by default).
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// Calls are the OpenAI API's calls so far, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Keys are the live keys' values by user_id.
func (s *Server) Keys() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]string{}
	for v, k := range s.keys {
		out[k.userID] = append(out[k.userID], v)
	}
	return out
}

// SpendMicros is user's metered spend on day (2006-01-02, UTC) in
// micro-dollars, all models.
func (s *Server) SpendMicros(user, day string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for dk, m := range s.spend {
		if dk.user == user && dk.day == day {
			n += m.micros
		}
	}
	return n
}

func random() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func tokenOf(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}

// fail writes OpenAI's error body.
func fail(w http.ResponseWriter, status int, typ, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func bearer(r *http.Request) string {
	v, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return v
}

func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(bearer(r)), []byte(s.MasterKey)) != 1 {
			fail(w, http.StatusUnauthorized, "auth_error", "401", "the admin API needs the master key")
			return
		}
		h(w, r)
	}
}

// userKey is the request's key, or an answered 401.
func (s *Server) userKey(w http.ResponseWriter, r *http.Request) (*key, bool) {
	v := bearer(r)
	s.mu.Lock()
	s.calls = append(s.calls, Call{Key: v, Path: r.URL.Path})
	k := s.keys[v]
	s.mu.Unlock()
	if k == nil {
		fail(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided: the key is unknown or revoked")
		return nil, false
	}
	return k, true
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.userKey(w, r); !ok {
		return
	}
	data := []map[string]any{}
	for _, m := range Models {
		data = append(data, map[string]any{"id": m.ID, "object": "model", "created": 0, "owned_by": "gw"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func model(id string) (Model, bool) {
	for _, m := range Models {
		if m.ID == id {
			return m, true
		}
	}
	return Model{}, false
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	k, ok := s.userKey(w, r)
	if !ok {
		return
	}
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, "invalid_request_error", "invalid_body", "the body is not a chat completion request: "+err.Error())
		return
	}
	m, ok := model(req.Model)
	if !ok {
		fail(w, http.StatusNotFound, "invalid_request_error", "model_not_found", "The model `"+req.Model+"` does not exist")
		return
	}
	var prompt int64
	for _, msg := range req.Messages {
		prompt += int64(len(strings.Fields(msg.Content)))
	}
	prompt = max(prompt, 1)
	s.mu.Lock()
	day := s.now().UTC().Format(time.DateOnly)
	var today int64
	for dk, mt := range s.spend {
		if dk.user == k.userID && dk.day == day {
			today += mt.micros
		}
	}
	if k.maxMicros >= 0 && today >= k.maxMicros {
		s.mu.Unlock()
		fail(w, http.StatusBadRequest, "budget_exceeded", "400", "Budget has been exceeded! Current cost: "+usd(today)+", Max budget: "+usd(k.maxMicros)+" (the daily cap; it resets at 00:00 UTC)")
		return
	}
	dk := dayKey{k.userID, day, m.ID}
	mt := s.spend[dk]
	if mt == nil {
		mt = &meter{}
		s.spend[dk] = mt
	}
	mt.micros += prompt*m.PromptMicros + CompletionTokens*m.CompletionMicros
	mt.prompt += prompt
	mt.completion += CompletionTokens
	mt.requests++
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "chatcmpl-" + random()[:12], "object": "chat.completion", "created": s.now().Unix(), "model": m.ID,
		"choices": []map[string]any{{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": "A canned answer from the gw stand-in."}}},
		"usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": CompletionTokens, "total_tokens": prompt + CompletionTokens},
	})
}

func usd(micros int64) string {
	b, _ := json.Marshal(float64(micros) / 1e6)
	return string(b)
}

// budgetMicros reads max_budget (USD; null or absent: none).
func budgetMicros(v *float64) int64 {
	if v == nil {
		return -1
	}
	return int64(*v*1e6 + 0.5)
}

func (k *key) answer(value string) map[string]any {
	out := map[string]any{"token": k.token, "user_id": k.userID, "key_alias": k.alias, "max_budget": nil, "budget_duration": "1d"}
	if value != "" {
		out["key"] = value
	}
	if k.maxMicros >= 0 {
		out["max_budget"] = float64(k.maxMicros) / 1e6
	}
	return out
}

func (s *Server) generate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		UserID    string   `json:"user_id"`
		KeyAlias  string   `json:"key_alias"`
		MaxBudget *float64 `json:"max_budget"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.UserID == "" {
		fail(w, http.StatusBadRequest, "invalid_request_error", "400", "give user_id (and max_budget, key_alias)")
		return
	}
	v := "sk-" + random()
	k := &key{token: tokenOf(v), userID: req.UserID, alias: req.KeyAlias, maxMicros: budgetMicros(req.MaxBudget)}
	s.mu.Lock()
	s.keys[v] = k
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, k.answer(v))
}

// find is the key whose value or token is v; the caller holds mu.
func (s *Server) find(v string) (string, *key) {
	if k := s.keys[v]; k != nil {
		return v, k
	}
	for value, k := range s.keys {
		if k.token == v {
			return value, k
		}
	}
	return "", nil
}

func (s *Server) update(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Key       string   `json:"key"`
		MaxBudget *float64 `json:"max_budget"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, "invalid_request_error", "400", "give key and max_budget")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, k := s.find(req.Key)
	if k == nil {
		fail(w, http.StatusNotFound, "not_found_error", "404", "no such key")
		return
	}
	k.maxMicros = budgetMicros(req.MaxBudget)
	writeJSON(w, http.StatusOK, k.answer(""))
}

func (s *Server) regenerate(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, k := s.find(r.PathValue("key"))
	if k == nil {
		fail(w, http.StatusNotFound, "not_found_error", "404", "no such key")
		return
	}
	delete(s.keys, old)
	v := "sk-" + random()
	k.token = tokenOf(v)
	s.keys[v] = k
	writeJSON(w, http.StatusOK, k.answer(v))
}

func (s *Server) deleteKeys(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Keys []string `json:"keys"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, "invalid_request_error", "400", "give keys")
		return
	}
	s.mu.Lock()
	before := s.beforeDelete
	s.mu.Unlock()
	if before != nil {
		before(req.Keys)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	deleted := []string{}
	for _, v := range req.Keys {
		if value, k := s.find(v); k != nil {
			delete(s.keys, value)
			deleted = append(deleted, v)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted_keys": deleted})
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, k := s.find(r.URL.Query().Get("key"))
	if k == nil {
		fail(w, http.StatusNotFound, "not_found_error", "404", "no such key")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"key": k.token, "info": k.answer("")})
}

// activity is LiteLLM's GET /user/daily/activity: user_id, start_date
// and end_date (UTC days, both included).
func (s *Server) activity(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	user, from, to := q.Get("user_id"), q.Get("start_date"), q.Get("end_date")
	for _, d := range []string{from, to} {
		if _, err := time.Parse(time.DateOnly, d); err != nil {
			fail(w, http.StatusBadRequest, "invalid_request_error", "400", "start_date and end_date are YYYY-MM-DD")
			return
		}
	}
	type breakdown struct {
		Metrics Metrics `json:"metrics"`
	}
	type day struct {
		Date      string  `json:"date"`
		Metrics   Metrics `json:"metrics"`
		Breakdown struct {
			Models map[string]*breakdown `json:"models"`
		} `json:"breakdown"`
	}
	days := map[string]*day{}
	var total Metrics
	s.mu.Lock()
	for dk, m := range s.spend {
		if dk.user != user || dk.day < from || dk.day > to {
			continue
		}
		d := days[dk.day]
		if d == nil {
			d = &day{Date: dk.day}
			d.Breakdown.Models = map[string]*breakdown{}
			days[dk.day] = d
		}
		mm := Metrics{Spend: float64(m.micros) / 1e6, PromptTokens: m.prompt, CompletionTokens: m.completion,
			TotalTokens: m.prompt + m.completion, APIRequests: m.requests}
		d.Breakdown.Models[dk.model] = &breakdown{Metrics: mm}
		add(&d.Metrics, mm)
		add(&total, mm)
	}
	s.mu.Unlock()
	results := []*day{}
	for _, d := range days {
		results = append(results, d)
	}
	sort.Slice(results, func(i, j int) bool { return results[i].Date < results[j].Date })
	writeJSON(w, http.StatusOK, map[string]any{"results": results, "metadata": map[string]any{
		"total_spend": total.Spend, "total_prompt_tokens": total.PromptTokens, "total_completion_tokens": total.CompletionTokens,
		"total_api_requests": total.APIRequests, "page": 1, "total_pages": 1, "has_more": false}})
}

func add(to *Metrics, m Metrics) {
	to.Spend += m.Spend
	to.PromptTokens += m.PromptTokens
	to.CompletionTokens += m.CompletionTokens
	to.TotalTokens += m.TotalTokens
	to.APIRequests += m.APIRequests
}

// Chat makes one chat completion on the OpenAI API with key as Bearer
// (prompt's words are its prompt tokens) and answers the status and body.
func (s *Server) Chat(key, model, prompt string) (int, string, error) {
	body, _ := json.Marshal(map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": prompt}}})
	req, err := http.NewRequest(http.MethodPost, s.URL+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
