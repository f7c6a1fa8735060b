"""An agent that asks svc before it runs a tool, in Python 3 with the standard
library only (docs/approvals.md, "The agent loop"):

  1. send the governed step;
  2. allow: run the tool; reject: do not;
  3. pending: wait on the session stream (Server-Sent Events) for the
     approval to close, read the approval, and run the tool only if it was
     approved, or expired with the timeout action "allow". A person who
     approved with edits gave approved_arguments: the tool runs with those,
     and the outcome carries their arguments_digest. A person who rejected
     may have answered instead (response): the agent passes it on (here,
     prints it). An approval that needs several approvers (quorum) stays
     pending until enough have approved: each vote arrives as
     approval:voted (printed), and the agent waits on until it closes;
  4. before running the tool, read the step's recorded outcome: a step with
     an outcome has run (the agent crashed after reporting it), so the tool
     does not run again;
  5. run the tool with the step as its idempotency key, and report its
     outcome on the step.

It never sends the step again to learn the decision: a re-sent step_id
answers what it answered first ("pending"), whatever happened since.

  SVC_URL=http://127.0.0.1:8080 SVC_API_KEY=$KEY python3 examples/agent.py payments.refund refund-2 '{"amount":42}'

The key needs agents.write and agents.read. SVC_SESSION_ID continues a
session; without it the agent starts one. It prints one line per change.
"""
import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

BASE_URL = os.environ.get("SVC_URL", "http://127.0.0.1:8080").rstrip("/")
API_KEY = os.environ.get("SVC_API_KEY", "")
TOOL = "example.echo"


def say(line):
    print(line, flush=True)


def call(method, path, body=None, attempts=60):
    """One API call; a transport failure (svc restarting) is tried again, an API answer is not."""
    data = None if body is None else json.dumps(body).encode()
    for attempt in range(attempts):
        request = urllib.request.Request(BASE_URL + path, data=data, method=method)
        request.add_header("Authorization", "Bearer " + API_KEY)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.load(response)
        except urllib.error.HTTPError as error:
            raise SystemExit(f"{method} {path}: {error.code} {error.read().decode()}")
        except (OSError, http.client.HTTPException):  # svc unreachable or the connection dropped
            if attempt + 1 == attempts:
                raise
            time.sleep(1)


def session_events(session_id, after):
    """The session's events after `after`, then live ones, as (id, event, data); ends when the stream does."""
    request = urllib.request.Request(f"{BASE_URL}/v1/agent-sessions/{session_id}/events/stream")
    request.add_header("Authorization", "Bearer " + API_KEY)
    request.add_header("Accept", "text/event-stream")
    request.add_header("Last-Event-ID", after)
    # svc sends a keep-alive comment on an idle stream, well within this timeout.
    with urllib.request.urlopen(request, timeout=120) as response:
        event_id, name, data = None, "message", []
        for raw in response:
            line = raw.decode("utf-8").rstrip("\r\n")
            if line == "":  # a blank line ends an event
                if data:
                    yield event_id, name, json.loads("\n".join(data))
                event_id, name, data = None, "message", []
            elif line.startswith(":"):
                continue  # a comment: connected, keep-alive
            else:
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "id":
                    event_id = value
                elif field == "event":
                    name = value
                elif field == "data":
                    data.append(value)


def wait_until_closed(session_id, approval_id):
    """Follows the session stream until the approval is decided or expires, resuming after the last event seen."""
    after = "0"  # the stream replays from here, so a decision made before it opened is not missed
    while True:
        try:
            for event_id, name, data in session_events(session_id, after):
                after = event_id or after
                if data.get("approval_id") != approval_id:
                    continue
                if name == "approval:voted":  # a quorum: one more approval, still pending
                    say(f"vote approve by {data['decided_by']}: {data['approvals_remaining']} more needed")
                if name in ("approval:decided", "approval:expired"):
                    return
        except (OSError, http.client.HTTPException):
            pass  # a dropped connection (URLError, a reset, a timeout, a cut response)
        time.sleep(1)  # the stream ended (svc restarting): resume with Last-Event-ID


def run_tool(idempotency_key, arguments):
    """The tool: here it only echoes its arguments. A real agent calls the API it
    governs with the step as the idempotency key (Stripe's Idempotency-Key, ...):
    when the agent crashed after the tool ran and before its outcome was
    recorded, the run repeated on restart acts once."""
    return {"echoed": arguments, "idempotency_key": idempotency_key}


def recorded_outcome(session_id, step_id):
    """The step's outcome as svc recorded it, or None: the session's steps, a page at a time."""
    cursor = None
    while True:
        query = "" if cursor is None else "?cursor=" + urllib.parse.quote(cursor, safe="")
        page = call("GET", f"/v1/agent-sessions/{session_id}{query}")
        for step in page["steps"]:
            if step["step_id"] == step_id:
                return step.get("outcome")
        cursor = page.get("next_cursor")
        if cursor is None:
            return None


def main():
    if len(sys.argv) < 3:
        raise SystemExit("usage: python3 examples/agent.py ACTION_CLASS STEP_ID [ARGUMENTS_JSON]")
    action_class, step_id = sys.argv[1], sys.argv[2]
    arguments = json.loads(sys.argv[3] if len(sys.argv) > 3 else "{}")

    session_id = os.environ.get("SVC_SESSION_ID") or call("POST", "/v1/agent-sessions", {})["id"]
    say(f"session {session_id}")

    # 1. The governed step. Re-sending it (after a crash) is safe: it answers the same.
    answer = call("POST", f"/v1/agent-sessions/{session_id}/steps",
                  {"step_id": step_id, "tool": TOOL, "action_class": action_class, "arguments": arguments})
    approval_id = answer.get("approval_id")
    say(f"step {step_id}: {answer['decision']}" + (f" approval {approval_id}" if approval_id else ""))

    run = answer["decision"] == "allow"
    digest = None  # the digest of a person's edited arguments, which the outcome must carry
    if answer["decision"] == "pending":
        # 3. Wait until the approval closes; the approval read is the answer, the stream only wakes the agent.
        approval = call("GET", f"/v1/agent-approvals/{approval_id}")
        if approval["status"] == "pending":
            say(f"waiting for approval {approval_id}")
            wait_until_closed(session_id, approval_id)
            approval = call("GET", f"/v1/agent-approvals/{approval_id}")
        status = approval["status"]
        say(f"approval {approval_id}: {status}" + (f" (timeout action {approval['timeout_action']})" if status == "expired" else ""))
        run = status == "approved" or (status == "expired" and approval["timeout_action"] == "allow")
        if "approved_arguments" in approval:  # a person edited the arguments: the tool runs with theirs
            arguments, digest = approval["approved_arguments"], approval["arguments_digest"]
            say("arguments edited: " + " ".join(approval.get("arguments_changed", [])))
        if "response" in approval:  # a person answered instead of letting the tool run
            say("response: " + json.dumps(approval["response"], separators=(",", ":")))

    if not run:
        say(f"tool {TOOL}: not run")
        return
    # 4. A step whose outcome is recorded has run: do not run the tool again.
    recorded = recorded_outcome(session_id, step_id)
    if recorded is not None:
        say(f"outcome {recorded['status']} already recorded: tool {TOOL} not run again")
        return
    # 5. Run the tool, idempotent by step, then report how it ended (tool:succeeded or tool:failed on the session stream).
    try:
        outcome = {"status": "succeeded", "result": run_tool(f"{session_id}/{step_id}", arguments)}
    except Exception as error:  # the tool failed: that is an outcome too
        outcome = {"status": "failed", "error": str(error)}
    say(f"tool {TOOL}: {outcome['status']}")
    if digest is not None:  # svc refuses an outcome of edited arguments without their digest
        outcome["arguments_digest"] = digest
    step = call("POST", f"/v1/agent-sessions/{session_id}/steps/{urllib.parse.quote(step_id, safe='')}/outcome", outcome)
    say(f"outcome {step['outcome']['status']} recorded")


if __name__ == "__main__":
    main()
