// The official TypeScript MCP SDK signs in to the api's control MCP:
// discovery from the MCP's 401, dynamic registration, the authorization
// request (its URL printed for the Go test, which approves it as the user
// and writes the callback URL back on stdin), the code exchange, a
// tools/list with the token, then the SDK's own refresh (auth() with a
// refresh token in hand) and a tools/list with the new token. Each step
// prints one JSON line; run by api/oauth's TestTypeScriptSDKSignsInAtAnHTTPSIssuer
// with MCP_SDK_DIR (the npm install) and MCP_URL set, and the api's test
// CA in NODE_EXTRA_CA_CERTS.
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const sdk = (p) => import(pathToFileURL(`${process.env.MCP_SDK_DIR}/node_modules/@modelcontextprotocol/sdk/dist/esm/${p}`).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { auth, UnauthorizedError } = await sdk("client/auth.js");

const say = (o) => console.log(JSON.stringify(o));
const redirect = "http://127.0.0.1:1455/callback";

// An in-memory OAuthClientProvider, as an agent keeps its credentials.
class Provider {
  get redirectUrl() { return redirect; }
  get clientMetadata() {
    return { client_name: "TypeScript SDK test", redirect_uris: [redirect], grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"], token_endpoint_auth_method: "none" };
  }
  clientInformation() { return this.client; }
  saveClientInformation(c) { this.client = c; }
  tokens() { return this.saved; }
  saveTokens(t) { this.saved = t; }
  redirectToAuthorization(u) { this.authorizationURL = u.href; }
  saveCodeVerifier(v) { this.verifier = v; }
  codeVerifier() { return this.verifier; }
}

const url = new URL(process.env.MCP_URL);
const provider = new Provider();
const tools = async () => {
  const client = new Client({ name: "ts-sdk-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
  const { tools } = await client.listTools();
  await client.close();
  return tools.map((t) => t.name);
};

const first = new StreamableHTTPClientTransport(url, { authProvider: provider });
try {
  await new Client({ name: "ts-sdk-test", version: "1.0.0" }).connect(first);
  throw new Error("the control MCP answered without a token");
} catch (e) {
  if (!(e instanceof UnauthorizedError)) throw e;
}
say({ step: "authorize", client_id: provider.client?.client_id, url: provider.authorizationURL });

const lines = createInterface({ input: process.stdin });
const callback = new URL((await lines[Symbol.asyncIterator]().next()).value);
lines.close();
await first.finishAuth(callback.searchParams.get("code"));
const signedIn = provider.tokens();
say({ step: "signed_in", iss: callback.searchParams.get("iss"), access: signedIn.access_token, refresh: signedIn.refresh_token, tools: await tools() });

if ((await auth(provider, { serverUrl: url })) !== "AUTHORIZED") throw new Error("auth() with a refresh token did not refresh");
const refreshed = provider.tokens();
say({ step: "refreshed", access: refreshed.access_token, refresh: refreshed.refresh_token, tools: await tools() });
