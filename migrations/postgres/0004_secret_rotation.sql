-- Secret rotation (DESIGN §4, §5): the secret replaced by the last rotation keeps
-- signing, next to the current one, until previous_secret_expires_at (epoch ms,
-- exclusive). Only one previous secret is kept: a second rotation during a grace period
-- replaces it with the secret that was current. Both columns are NULL outside a grace
-- period. Secret columns hold either the `whsec_…` text or, when the server runs with a
-- secret key, `enc:v1:<base64 nonce || ciphertext>` (src/store/sealing.rs).

ALTER TABLE subscribers ADD COLUMN previous_secret TEXT;
ALTER TABLE subscribers ADD COLUMN previous_secret_expires_at BIGINT;
