"""The HTTP API: `zkqueue serve`, for clients that are not Python and hold no Redis credentials.

Stateless: every instance reads and writes only Redis and the artifact store, so several
run behind one load balancer. Routes (the OpenAPI document at /openapi.json has them all):

    GET    /healthz, /openapi.json                         no key needed
    POST   /v1/circuits                                    upload (multipart, streamed) or name by sha256
    GET    /v1/circuits/{id}, .../verification_key
    POST   /v1/circuits/{id}/proofs                        inputs (JSON) or witnesses (multipart)
    GET    /v1/jobs/{id}, .../events (SSE), .../proofs/{i}[/proof.json|/public.json]
    DELETE /v1/jobs/{id}

Modules, one job each: app (assembly, per-request plumbing), routes (the handlers), auth
(API keys and quotas), uploads (streamed multipart into the store), capture (header checks
of streamed files), circuits (the circuit registry), views (JSON of jobs), sse (the event
stream), errors (the one error shape), openapi, metrics, server (uvicorn).

Arrows: api imports coordinator, groth16 and zkqueue.config; nothing imports api but the
CLI's `serve` and `api-keys` commands, lazily.
"""
