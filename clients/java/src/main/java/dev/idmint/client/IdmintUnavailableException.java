package dev.idmint.client;

/**
 * IdmintUnavailableException: no endpoint issued before the call's
 * timeout (all down, all refusing with 503 or 429, all too slow). The
 * cause is the last endpoint failure; {@link #endpoint()} names its
 * endpoint. The client keeps trying in the background: a later call may
 * succeed.
 */
public final class IdmintUnavailableException extends IdmintException {
    private static final long serialVersionUID = 1L;

    IdmintUnavailableException(String key, IdmintException last, String message) {
        super(key, last == null ? null : last.endpoint(), last == null ? 0 : last.status(),
                last == null ? null : last.code(), null, true, message, last);
    }
}
