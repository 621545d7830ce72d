#!/usr/bin/env bash
# runner-guard.sh: the self-hosted runner's job-started hook (ACTIONS_RUNNER_HOOK_JOB_STARTED).
#
# The GPU runners keep a result store, images and ccache that later jobs trust, so only this
# repository's own scheduled and dispatched workflows on main may run there. GitHub can enforce
# that only with runner-group workflow restrictions, which exist on some plans only; this hook
# works on any plan: the runner runs it before the job's first step. A non-zero exit alone is
# not enough: the runner marks the job failed and still runs its `if: always()` steps and every
# action's `post:` (actions/runner#2811, closed unfixed). So a refusal also ends the job's
# worker process (the Runner.Worker this hook runs under), which stops every later step. Install
# and allowlist format: docs/github.md ("Runner guard"); example allowlist:
# scripts/runner-guard.allow.example.
#
# A job is accepted only when an allowlist line names its event (GITHUB_EVENT_NAME), repository
# (GITHUB_REPOSITORY) and workflow ref (GITHUB_WORKFLOW_REF). The runner sets those from the job
# GitHub sent; nothing a pull request's author writes (branch names, titles, workflow files of a
# fork) is read. The event payload is checked too: its repository must be the job's, and a
# pull request (or a workflow_run started by one) must come from this repository, not a fork,
# even where an allowlist line names its event. Anything unexpected refuses: no allowlist, a
# malformed line, no jq, an unreadable payload.
#
# Output: exactly one line, `runner-guard: accepted ...` or `::error::runner-guard: refused ...`
# (an annotation on the run). It holds the three values above, the reason, the allowlist's
# path and, on a refusal under a runner, the worker it stops; no secret and no free text from
# the payload.
set -euo pipefail

allow=${RUNNER_GUARD_ALLOW:-/etc/setrows-bisect/runner-allow}
event=${GITHUB_EVENT_NAME:-}
repo=${GITHUB_REPOSITORY:-}
wref=${GITHUB_WORKFLOW_REF:-}
payload=${GITHUB_EVENT_PATH:-}

# A value as it may appear in a workflow command: only characters of names and refs, bounded,
# so no value can end the line, smuggle `%0A` or start a command of its own.
clean() {
  local v=${1//[^A-Za-z0-9._\/@*:+=-]/?}
  printf '%s' "${v:0:200}"
}

job() {
  printf '%s job of %s (%s)' "$(clean "${event:-unknown}")" "$(clean "${repo:-unknown}")" \
    "$(clean "${wref:-unknown}")"
}

# The job's worker: the nearest ancestor named Runner.Worker that was started as the runner
# starts one (`Runner.Worker spawnclient IN OUT`). Nothing else is ever a candidate, so a hook
# run by hand from a shell stops nothing.
worker() {
  local pid=$$ comm args
  while :; do
    pid=$(awk '/^PPid:/ { print $2 }' "/proc/$pid/status" 2>/dev/null) || return 1
    { [ -n "$pid" ] && [ "$pid" -gt 1 ]; } || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [ "$comm" = Runner.Worker ] || continue
    args=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
    case "$args" in
      *Runner.Worker\ spawnclient\ *)
        printf '%s' "$pid"
        return 0
        ;;
    esac
  done
}

refuse() {
  local w stop=""
  if w=$(worker); then
    stop="; stopping its Runner.Worker ($w), so no later step runs"
  fi
  printf '::error::runner-guard: refused %s: %s (allowlist %s)%s\n' "$(job)" "$1" "$(clean "$allow")" "$stop"
  # The line is out first: the worker is the one that reads it.
  [ -z "$stop" ] || kill -KILL "$w" 2>/dev/null || true
  exit 1
}

[ -n "$event" ] || refuse "GITHUB_EVENT_NAME is not set"
[ -n "$repo" ] || refuse "GITHUB_REPOSITORY is not set"
[ -n "$wref" ] || refuse "GITHUB_WORKFLOW_REF is not set"
case "$wref" in
  "$repo"/.github/workflows/*@refs/*) ;;
  *) refuse "the workflow ref is not a workflow of $(clean "$repo") at a ref" ;;
esac
wfile=${wref#"$repo"/}

# The allowlist: `EVENT OWNER/REPO WORKFLOW@REF` per line, `#` starts a comment. One bad line
# voids the whole file: an allowlist the admin misread must not be applied in part.
{ [ -f "$allow" ] && [ -r "$allow" ]; } || refuse "the allowlist is missing or unreadable, so every job is refused"
entries=()
n=0
while IFS= read -r line || [ -n "$line" ]; do
  n=$((n + 1))
  line=${line%$'\r'}
  line=${line%%#*}
  read -r -a f <<<"$line" || true
  [ "${#f[@]}" -eq 0 ] && continue
  if [ "${#f[@]}" -ne 3 ] ||
    ! [[ ${f[0]} =~ ^[a-z_]+$ ]] ||
    ! [[ ${f[1]} =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]] ||
    ! [[ ${f[2]} =~ ^\.github/workflows/[^@]+@refs/.+$ ]]; then
    refuse "allowlist line $n is malformed (want: EVENT OWNER/REPO .github/workflows/FILE@REF), so every job is refused"
  fi
  entries+=("$n ${f[0]} ${f[1]} ${f[2]}")
done <"$allow"
[ "${#entries[@]}" -gt 0 ] || refuse "the allowlist has no entries, so every job is refused"

matched=
for e in "${entries[@]}"; do
  read -r ln ev rp wf <<<"$e"
  # shellcheck disable=SC2053 # $wf is the allowlist's glob: unquoted on purpose
  if [ "$ev" = "$event" ] && [ "$rp" = "$repo" ] && [[ $wfile == $wf ]]; then
    matched=$ln
    break
  fi
done
[ -n "$matched" ] || refuse "no allowlist line names this event, repository and workflow ref"

# The payload: GitHub's record of what caused the run. Read only fields GitHub sets (repository
# names), never ones a fork's author chooses (branch names, titles, bodies).
command -v jq >/dev/null || refuse "jq is missing, so the event payload cannot be checked"
{ [ -n "$payload" ] && [ -f "$payload" ] && [ -r "$payload" ]; } ||
  refuse "the event payload (GITHUB_EVENT_PATH) is missing or unreadable"
field() {
  jq -r "$1 | if type == \"string\" then . else \"\" end" "$payload" 2>/dev/null
}
jq -e 'type == "object"' "$payload" >/dev/null 2>&1 || refuse "the event payload is not a JSON object"

# A schedule's payload may carry no repository at all; where there is one it must be the job's.
prepo=$(field '.repository.full_name') || refuse "the event payload cannot be read"
[ -z "$prepo" ] || [ "$prepo" = "$repo" ] ||
  refuse "the event payload is of repository $(clean "$prepo"), not the job's"

# By event name as well as by payload, so a payload without the key cannot skip the check.
if [[ $event == pull_request* ]] || jq -e 'has("pull_request")' "$payload" >/dev/null 2>&1; then
  head=$(field '.pull_request.head.repo.full_name')
  [ -n "$head" ] || refuse "the pull request's head repository is unknown (a deleted fork?)"
  [ "$head" = "$repo" ] || refuse "the pull request comes from $(clean "$head"), a fork"
fi
if [ "$event" = workflow_run ] || jq -e 'has("workflow_run")' "$payload" >/dev/null 2>&1; then
  head=$(field '.workflow_run.head_repository.full_name')
  [ -n "$head" ] || refuse "the triggering run's head repository is unknown"
  [ "$head" = "$repo" ] || refuse "the triggering run ran code of $(clean "$head"), a fork"
fi

printf 'runner-guard: accepted %s: allowlist %s line %s\n' "$(job)" "$(clean "$allow")" "$matched"
