package dev.idmint.client;

/**
 * EndpointException is one endpoint's failure inside the client: the
 * cause of an {@link IdmintUnavailableException}, or thrown as is for a
 * retryable failure a caller sees directly (decode).
 */
final class EndpointException extends IdmintException {
    private static final long serialVersionUID = 1L;
    final long retryAfterNanos;

    EndpointException(String key, String endpoint, int status, String code, String field, boolean retryable, String message, long retryAfterNanos, Throwable cause) {
        super(key, endpoint, status, code, field, retryable, message, cause);
        this.retryAfterNanos = retryAfterNanos;
    }
}
