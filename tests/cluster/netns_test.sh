#!/usr/bin/env bash
# Two `quarry worker` nodes in network namespaces of their own, joined by a
# veth pair (10.201.N.1 and 10.201.N.2), so that the connection between the
# session and the worker is not loopback:
#   - worker A (namespace A) listens on its veth address with mutual TLS;
#   - worker B (namespace B) is refused its veth address without TLS (exit 2);
#   - a session in namespace B with the cluster's certificates places its
#     agent on worker A; the same session without TLS is refused by worker A
#     and runs its agent itself;
#   - partition: a session places its agent on a worker in namespace A whose
#     model never answers, then namespace A's link goes down (its traffic is
#     dropped, nothing is reset): the worker is lost after the heartbeat
#     timeout and the agent runs again on the session's node.
# The first part uses the offline extractive provider and the example corpus;
# the partition uses a fake LLM server in each namespace (argument 2).
# Exit 77 (skipped) where namespaces cannot be made (no CAP_SYS_ADMIN, no
# iproute2), with the reason on stderr.
set -uo pipefail

quarry="$1"
fake_llm="${2:-}"
tag="q$$"
ns_a="${tag}a"
ns_b="${tag}b"
net="10.201.$(( $$ % 200 + 1 ))"
work="$(mktemp -d)"
pids=()

cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

skip() {
  echo "SKIPPED: $*" >&2
  exit 77
}
fail() {
  echo "FAILED: $*" >&2
  for f in "$work"/*.err; do echo "--- $f" >&2; tail -n 20 "$f" >&2; done
  exit 1
}

command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
command -v openssl >/dev/null || skip "openssl is not installed"
ip netns add "$ns_a" 2>"$work/netns.err" \
  || skip "network namespaces cannot be created here: $(cat "$work/netns.err")"
ip netns add "$ns_b" || skip "a second network namespace cannot be created"
ip link add "${tag}va" type veth peer name "${tag}vb" \
  || skip "a veth pair cannot be created"
ip link set "${tag}va" netns "$ns_a" && ip link set "${tag}vb" netns "$ns_b" \
  || fail "moving the veth ends into the namespaces"
ip -n "$ns_a" addr add "$net.1/24" dev "${tag}va"
ip -n "$ns_b" addr add "$net.2/24" dev "${tag}vb"
for ns in "$ns_a" "$ns_b"; do
  ip -n "$ns" link set lo up
done
ip -n "$ns_a" link set "${tag}va" up
ip -n "$ns_b" link set "${tag}vb" up

# A private CA, the worker's and the session's certificates.
pki="$work/pki"
mkdir -p "$pki"
(
  cd "$pki" || exit 1
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=cluster-ca \
    -keyout ca.key -out ca.pem 2>/dev/null
  for n in worker session; do
    openssl req -newkey rsa:2048 -nodes -subj "/CN=$n" -keyout "$n.key" -out "$n.csr" 2>/dev/null
    openssl x509 -req -days 2 -in "$n.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
      -out "$n.pem" 2>/dev/null
  done
) || fail "making the certificates"

tls() {
  echo --set "cluster.tls.cert=$pki/$1.pem" --set "cluster.tls.key=$pki/$1.key" \
    --set "cluster.tls.ca=$pki/ca.pem"
}

# Runs quarry in namespace $1 with home $2, as a new user would (no keys).
# `ip netns exec` and `env` exec, so a background call's $! is quarry's pid.
clean_env=(-u OPENAI_API_KEY -u OPENAI_BASE_URL -u ANTHROPIC_API_KEY -u BRAVE_API_KEY
           -u TAVILY_API_KEY -u XDG_CONFIG_HOME -u XDG_DATA_HOME)
in_ns() {
  local ns="$1" home="$2"
  shift 2
  mkdir -p "$home"
  ip netns exec "$ns" env "${clean_env[@]}" HOME="$home" "$quarry" "$@"
}

# Worker A: mutual TLS on its veth address.
mkdir -p "$work/home-a"
# shellcheck disable=SC2046
ip netns exec "$ns_a" env "${clean_env[@]}" HOME="$work/home-a" "$quarry" --log-level info \
  worker --listen "$net.1:0" $(tls worker) >"$work/worker-a.out" 2>"$work/worker-a.err" &
pids+=($!)
for _ in $(seq 1 600); do
  grep -q "worker listening on" "$work/worker-a.err" && break
  kill -0 "${pids[0]}" 2>/dev/null || fail "worker A ended"
  sleep 0.1
done
address="$(grep -o "worker listening on [0-9.]*:[0-9]*" "$work/worker-a.err" | awk '{print $4}')"
[[ -n "$address" ]] || fail "worker A did not say where it listens"
grep -q "(mutual TLS)" "$work/worker-a.err" || fail "worker A does not use TLS"
echo "worker A listens on $address with mutual TLS"

# Worker B: its veth address without TLS is refused.
in_ns "$ns_b" "$work/home-b" worker --listen "$net.2:0" >"$work/worker-b.out" 2>"$work/worker-b.err"
rc=$?
[[ $rc -eq 2 ]] || fail "worker B without TLS on $net.2 exited $rc, expected 2"
grep -q "refusing to listen on $net.2:0 without TLS" "$work/worker-b.err" \
  || fail "worker B's refusal does not say why"
echo "worker B: plaintext on $net.2 refused"

question="Why does a heat pump's efficiency drop in cold weather?"
# shellcheck disable=SC2046
in_ns "$ns_b" "$work/home-s" --log-level info research --no-clarify --no-store --json \
  --set "cluster.workers=[$address]" $(tls session) "$question" \
  >"$work/tls.out" 2>"$work/tls.err"
rc=$?
[[ $rc -eq 0 ]] || fail "the session with TLS exited $rc"
grep -q "runs on worker $address" "$work/tls.err" || fail "the agent did not run on worker A"
grep -q "worker: agent .* started" "$work/worker-a.err" || fail "worker A ran no agent"
ran_on_a="$(grep -c 'worker: agent .* started' "$work/worker-a.err")"
echo "session in namespace B with TLS: its $ran_on_a agents ran on worker A over $net.0/24"

in_ns "$ns_b" "$work/home-p" --log-level info research --no-clarify --no-store --json \
  --set "cluster.workers=[$address]" "$question" >"$work/plain.out" 2>"$work/plain.err"
rc=$?
[[ $rc -eq 0 ]] || fail "the session without TLS exited $rc"
grep -q "worker $address cannot be used" "$work/plain.err" \
  || fail "the plaintext session was not refused by worker A"
if grep -q "runs on worker" "$work/plain.err"; then
  fail "an agent of the plaintext session ran on worker A"
fi
[[ "$(grep -c 'worker: agent .* started' "$work/worker-a.err")" -eq "$ran_on_a" ]] \
  || fail "worker A ran an agent for the plaintext session"
echo "session in namespace B without TLS: refused, its agent ran on its own node"
kill -TERM "${pids[0]}"
wait "${pids[0]}"
rc=$?
pids=()
[[ $rc -eq 143 ]] || fail "worker A exited $rc on SIGTERM, expected 143"

if [[ -z "$fake_llm" ]]; then
  echo "PASSED (without the partition: no fake LLM server given)"
  exit 0
fi
# Partition. Namespace B's model follows the whole script; namespace A's never
# answers a research agent.
agent="careful, precise research agent"
cat >"$work/script-b.json" <<JSON
[
  {"match": {"system_contains": "You are the planner"}, "respond": {"text": "1. One step"}},
  {"match": {"system_contains": "You are the orchestrator", "times": 1},
   "respond": {"tool_calls": [{"name": "research_agent", "arguments": {"task": "Task 0"}}]}},
  {"match": {"system_contains": "You are the orchestrator"},
   "respond": {"tool_calls": [{"name": "generate_report", "arguments": {}}]}},
  {"match": {"system_contains": "$agent", "message_contains": "\"document\""},
   "respond": {"tool_calls": [{"name": "generate_report", "arguments": {}}]}},
  {"match": {"system_contains": "$agent"},
   "respond": {"tool_calls": [{"name": "internal_search",
                               "arguments": {"queries": ["heat pump defrost cold"]}}]}},
  {"match": {"system_contains": "finished its research"},
   "respond": {"text": "Heat pump efficiency falls as the outdoor air gets colder [1]."}},
  {"match": {"system_contains": "You write the final answer"}, "respond": {"text": "Done [1]."}}
]
JSON
cat >"$work/script-a.json" <<JSON
[{"match": {"system_contains": "$agent"}, "respond": {"text": "never"}, "stall_after_bytes": 0}]
JSON
# Called directly (not in $(...), whose subshell would keep the pid from
# `pids` and leave the server running after the test).
start_llm() {
  local ns="$1" script="$2" out="$3"
  ip netns exec "$ns" "$fake_llm" --script "$script" >"$out" 2>"$out.err" &
  pids+=($!)
  for _ in $(seq 1 100); do
    [[ -s "$out" ]] && break
    sleep 0.1
  done
}
start_llm "$ns_a" "$work/script-a.json" "$work/llm-a.port"
start_llm "$ns_b" "$work/script-b.json" "$work/llm-b.port"
port_a="$(head -n 1 "$work/llm-a.port")"
port_b="$(head -n 1 "$work/llm-b.port")"
[[ -n "$port_a" && -n "$port_b" ]] || fail "the fake LLM servers did not start"

mkdir -p "$work/home-a2" "$work/home-s2"
# shellcheck disable=SC2046
ip netns exec "$ns_a" env "${clean_env[@]}" HOME="$work/home-a2" OPENAI_API_KEY=k \
  OPENAI_BASE_URL="http://127.0.0.1:$port_a/v1" "$quarry" --log-level info \
  worker --listen "$net.1:0" $(tls worker) >"$work/worker-a2.out" 2>"$work/worker-a2.err" &
pids+=($!)
for _ in $(seq 1 600); do
  grep -q "worker listening on" "$work/worker-a2.err" && break
  sleep 0.1
done
address2="$(grep -o "worker listening on [0-9.]*:[0-9]*" "$work/worker-a2.err" | awk '{print $4}')"
[[ -n "$address2" ]] || fail "the second worker in namespace A did not start"
# shellcheck disable=SC2046
ip netns exec "$ns_b" env "${clean_env[@]}" HOME="$work/home-s2" OPENAI_API_KEY=k \
  OPENAI_BASE_URL="http://127.0.0.1:$port_b/v1" "$quarry" --log-level info research \
  --no-clarify --no-store --json --set "cluster.workers=[$address2]" \
  --set cluster.heartbeat=200ms --set cluster.heartbeat_timeout=1500ms $(tls session) \
  "$question" >"$work/partition.out" 2>"$work/partition.err" &
session=$!
for _ in $(seq 1 600); do
  grep -q "worker: agent .* started" "$work/worker-a2.err" && break
  sleep 0.1
done
grep -q "worker: agent .* started" "$work/worker-a2.err" || fail "the agent never started on the worker"
ip -n "$ns_a" link set "${tag}va" down
partitioned_at=$(date +%s%N)
for _ in $(seq 1 600); do
  kill -0 "$session" 2>/dev/null || break
  sleep 0.1
done
wait "$session"
rc=$?
[[ $rc -eq 0 ]] || fail "the partitioned session exited $rc"
grep -q "worker $address2 lost" "$work/partition.err" || fail "the partitioned worker was not taken as lost"
grep -q '"type":"agent_superseded"' "$work/partition.out" || fail "no agent_superseded packet"
grep -q "research agent 1 runs on this node" "$work/partition.err" \
  || fail "the agent did not run again on the session's node"
tail -n 1 "$work/partition.out" | grep -q '"type":"stop"' || fail "the partitioned session did not end"
echo "partition: worker lost after $(( ($(date +%s%N) - partitioned_at) / 1000000 )) ms at most, the agent ran again on the session's node"
echo "PASSED"
