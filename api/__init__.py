"""The HTTP API: `zkqueue serve`, for clients that are not Python and hold no Redis credentials.

Stateless: every instance reads and writes only Redis and the artifact store, so several
run behind one load balancer. Routes (the OpenAPI document at /openapi.json has them all;
/docs shows it as a page):

    GET    /healthz, /openapi.json, /docs                  no key needed
    POST   /v1/circuits                                    upload (multipart, streamed) or name by sha256
    GET    /v1/circuits/{id}, .../verification_key
    POST   /v1/circuits/{id}/proofs                        inputs (JSON) or witnesses (multipart)
    GET    /v1/jobs/{id}, .../events (SSE), .../proofs/{i}[/proof.json|/public.json]
    DELETE /v1/jobs/{id}

Modules, one job each: app (assembly), state (a process's connections and per-request
plumbing), routes (the handlers and the one declaration of every route: endpoint.Endpoint),
models (each route's inputs and outputs as pydantic models: the request checks and the
document's schemas), openapi (the document, generated from those), docs (its HTML page),
auth (API keys and quotas), uploads (streamed multipart into the store), capture (header
checks of streamed files), circuits (the circuit registry), proofs (proof requests), views
(JSON of jobs), sse (the event stream), errors (the one error shape), metrics, server
(uvicorn).

Arrows: api imports coordinator, groth16 and zkqueue.config; nothing imports api but the
CLI's `serve` and `api-keys` commands, lazily.
"""
