package main

// The help of branchbox and of each verb (the manual; docs/branchbox.md
// has the JSON of every verb).

const rootLong = `The assignment is DIR/managed/RUN_ID/assignment.json (DIR defaults to
/run/branchbox); NAME must be its "feature". Every verb checks the whole
assignment first (strict JSON, every rule of the security contract, on
opened descriptors) and refuses with the rule broken and the path.

--json prints one JSON object on stdout: check's report, or any verb's
refusal ({"status":"refused"|"failed","rule":...,"where":...,"error":...,
"exit_code":...,"retryable":...}), materialize's
{"status":"materialized","workspace":...,"sources":...,"ledger":...},
teardown's receipt {"removed":[...],"residue":[{"path","error"}],
"residue_free":...,"receipt_path":...} (engine objects as "docker
container NAME", network, volume), launch's {"status":"launched",
"launch":{...}}, dispatch-tool's {"status":"dispatched","request_id",
"response","cached"}.

Exit codes: 0 done; 1 a failure a retry will not fix; 2 usage; 65 the
assignment, or an argument (NAME, --run, --lease, --request-id, --consumer,
--executable, --inherit: each held to its manifest field's grammar before any
file is opened), breaks a rule (the error names it); 66 no such run; 73 an
unsafe path (symlink, owner, mode, links); 74 an I/O error; 75 try again later
(out of space or memory; another branchbox holds the run's lock,
DIR/locks/RUN_ID.lock, taken by materialize, exec and teardown); after exec,
the provider's own; teardown with residue exits 1 (the receipt lists it).`

const checkLong = `Validate the assignment and print what it would do.`

const materializeLong = `Check the repository's shared Git metadata (runtime-owned, not group/other-
writable, no replaceable ancestor), check out a new branch at the signed base
into the new workspace directory and record the run's ledger
(DIR/state/RUN_ID/ledger.json). Version 3 delegates the workspace and the
shared Git metadata to the workspace consumer's group; --reuse and an existing
branch are refused (versions 1 and 2: --reuse takes the existing branch).`

const execLong = `Start the executable for the consumer: only when it and the --inherit names
match one live model-identity lease exactly; its environment is only
PATH=/usr/local/bin:/usr/bin:/bin, the inherited names from branchbox's own
environment and the consumer's digest-checked provider-environment values.
branchbox execs it (as the version 3 workspace consumer, else the run's owner;
in the workspace when it exists), so its exit status is the provider's.`

const teardownLong = `Remove the workspace, the run directory with every source (non-empty shared
directories and sockets too) and the state directory with the ledger; write
the receipt DIR/receipts/RUN_ID.json naming every path removed and any
residue. --force is required for version 3: its consumer could edit the shared
Git metadata, and no dirty-worktree check is made (commit what you want to
keep first).`

const launchLong = `Start the managed Dev Container (version 3, materialized): the repository's
devcontainer.json and Compose files checked, the Compose facade written to
DIR/state/RUN_ID/facade, every assigned image inspected locally (nothing built
or pulled), the workspace copied into the volume branchbox-RUN_ID-workspace,
then the Dev Containers CLI's up (PATH, default devcontainer); the final
inspection of the primary container's mounts and seccomp profile, its provider
user's UID (the kernel's, of a process started as that user) against the
workspace copy's owner and consumer_uid, each request spool initialized, the
port proxy started. Any failure removes what was started; what a killed launch
of the run left (labelled with the run) is removed first. Without --run, the
one materialized run of NAME.`

const dispatchToolLong = `Handle one request of tool-request lease L: the provider user checked again,
then requests/ID.json claimed, recorded, relayed to the linked endpoint and
answered in responses/ID.json (docs/branchbox.md). Exit 75 with
{"status":"not-pending", "retryable":true} when no request arrived within S
seconds (default 0: look once), or {"status":"transport-retry"} when a signed
exact replay could not reach the endpoint in time; every refusal is terminal
(65, 73, ...), never 75.`
