package dev.idmint.client;

/**
 * IdmintException is every failure of the client: it names the key, the
 * endpoint that answered last (null when none was tried) and the cause.
 * It is unchecked, as uid-generator's UidGenerateException is. Subclasses
 * say what kind of failure it was; {@link #retryable()} says whether the
 * same call may succeed later.
 */
public class IdmintException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String key;
    private final String endpoint;
    private final int status;
    private final String code;
    private final String field;
    private final boolean retryable;
    final String detail; // the message without the key, endpoint and status

    IdmintException(String key, String endpoint, int status, String code, String field, boolean retryable, String message, Throwable cause) {
        super(describe(key, endpoint, status, code, field, message), cause);
        this.key = key;
        this.endpoint = endpoint;
        this.status = status;
        this.code = code;
        this.field = field;
        this.retryable = retryable;
        this.detail = message;
    }

    private static String describe(String key, String endpoint, int status, String code, String field, String message) {
        StringBuilder b = new StringBuilder("idmint: ");
        if (key != null) {
            b.append("key \"").append(key).append("\": ");
        }
        if (endpoint != null) {
            b.append(endpoint).append(": ");
        }
        if (status != 0) {
            b.append(status).append(' ');
        }
        if (code != null) {
            b.append(code).append(": ");
        }
        b.append(message);
        if (field != null) {
            b.append(" (field ").append(field).append(')');
        }
        return b.toString();
    }

    /** The key the call was for; null for calls about no key. */
    public String key() {
        return key;
    }

    /** The endpoint whose answer or failure this is; null when no endpoint was tried. */
    public String endpoint() {
        return endpoint;
    }

    /** The HTTP status of the answer; 0 for a network failure or a timeout. */
    public int status() {
        return status;
    }

    /** The server's error code ("unknown_key", "bad_count", ...), or null. */
    public String code() {
        return code;
    }

    /** The request field the server named, or null. */
    public String field() {
        return field;
    }

    /**
     * Whether another endpoint, or this one later, may succeed: true for
     * network failures, timeouts, 5xx, 429 and malformed answers; false
     * for 400, 401, 403 and an unknown key.
     */
    public boolean retryable() {
        return retryable;
    }
}
