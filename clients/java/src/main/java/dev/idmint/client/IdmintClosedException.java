package dev.idmint.client;

/** IdmintClosedException: the client was closed before or during the call. */
public final class IdmintClosedException extends IdmintException {
    private static final long serialVersionUID = 1L;

    IdmintClosedException(String key) {
        super(key, null, 0, null, null, false, "client closed", null);
    }
}
