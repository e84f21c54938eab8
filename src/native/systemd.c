/*
 * lmd-systemd.node: the two datagram protocols by which a service speaks to systemd, for Node, which
 * has no Unix datagram sockets.
 *
 * - notify(socket, message): one sd_notify(3) datagram (READY=1, STATUS=..., WATCHDOG=1) to the
 *   socket NOTIFY_SOCKET names ("@name" is the abstract namespace). It is sent by the calling
 *   process itself, so the unit's NotifyAccess=main accepts it (a helper process such as
 *   systemd-notify would be another PID, and one that may exit before systemd reads its cgroup).
 * - journal(entry): one entry in the journal's native protocol (KEY=value lines, or KEY, a 64-bit
 *   little-endian length and the bytes for values with newlines) to /run/systemd/journal/socket.
 *   An entry larger than a datagram goes in a sealed memfd passed with SCM_RIGHTS, as
 *   sd_journal_sendv does.
 *
 * Each returns 0 or a negative errno; nothing throws for a failed send (a service must not stop
 * because its supervisor or the journal went away). Only the stable N-API (node_api.h) is used.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define JOURNAL_SOCKET "/run/systemd/journal/socket"

/* Fills addr from a NOTIFY_SOCKET-style path; returns the address length, or -1 if it cannot be one. */
static int unix_address(struct sockaddr_un *addr, const char *path, size_t len) {
	memset(addr, 0, sizeof(*addr));
	addr->sun_family = AF_UNIX;
	if (len == 0 || len >= sizeof(addr->sun_path)) return -1;
	memcpy(addr->sun_path, path, len);
	if (path[0] == '@') addr->sun_path[0] = '\0';
	else if (path[0] != '/') return -1;
	return (int)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '@' ? 0 : 1));
}

static int send_datagram(const char *path, size_t path_len, const char *data, size_t len) {
	struct sockaddr_un addr;
	int addr_len = unix_address(&addr, path, path_len);
	if (addr_len < 0) return -EINVAL;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) return -errno;
	ssize_t n = sendto(fd, data, len, MSG_NOSIGNAL, (struct sockaddr *)&addr, (socklen_t)addr_len);
	int err = n < 0 ? -errno : 0;
	close(fd);
	return err;
}

/* An entry too large for one datagram: written to a sealed memfd whose descriptor is sent instead. */
static int send_memfd(int fd, struct sockaddr_un *addr, int addr_len, const char *data, size_t len) {
	int mem = memfd_create("journal-entry", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mem < 0) return -errno;
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(mem, data + done, len - done);
		if (n < 0) {
			if (errno == EINTR) continue;
			int err = -errno;
			close(mem);
			return err;
		}
		done += (size_t)n;
	}
	if (fcntl(mem, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
		int err = -errno;
		close(mem);
		return err;
	}
	char control[CMSG_SPACE(sizeof(int))];
	memset(control, 0, sizeof(control));
	struct msghdr msg = {.msg_name = addr, .msg_namelen = (socklen_t)addr_len, .msg_control = control, .msg_controllen = sizeof(control)};
	struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cmsg), &mem, sizeof(int));
	ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
	int err = n < 0 ? -errno : 0;
	close(mem);
	return err;
}

/* The journal's socket, opened once and kept (a log line must not cost a socket). */
static int journal_fd = -1;

static int send_journal(const char *data, size_t len) {
	struct sockaddr_un addr;
	int addr_len = unix_address(&addr, JOURNAL_SOCKET, strlen(JOURNAL_SOCKET));
	if (journal_fd < 0) {
		journal_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (journal_fd < 0) return -errno;
	}
	ssize_t n = sendto(journal_fd, data, len, MSG_NOSIGNAL, (struct sockaddr *)&addr, (socklen_t)addr_len);
	if (n >= 0) return 0;
	if (errno == EMSGSIZE || errno == ENOBUFS) return send_memfd(journal_fd, &addr, addr_len, data, len);
	return -errno;
}

/* The bytes of a string or Buffer argument, copied into a malloc'd buffer (*out, *len). */
static napi_status bytes_of(napi_env env, napi_value value, char **out, size_t *len) {
	bool is_buffer = false;
	napi_status s = napi_is_buffer(env, value, &is_buffer);
	if (s != napi_ok) return s;
	if (is_buffer) {
		void *data;
		s = napi_get_buffer_info(env, value, &data, len);
		if (s != napi_ok) return s;
		*out = malloc(*len + 1);
		if (*out == NULL) return napi_generic_failure;
		memcpy(*out, data, *len);
		return napi_ok;
	}
	s = napi_get_value_string_utf8(env, value, NULL, 0, len);
	if (s != napi_ok) return s;
	*out = malloc(*len + 1);
	if (*out == NULL) return napi_generic_failure;
	return napi_get_value_string_utf8(env, value, *out, *len + 1, len);
}

static napi_value result(napi_env env, int code) {
	napi_value v;
	napi_create_int32(env, code, &v);
	return v;
}

static napi_value notify(napi_env env, napi_callback_info info) {
	size_t argc = 2;
	napi_value argv[2];
	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2) return result(env, -EINVAL);
	char *path = NULL, *message = NULL;
	size_t path_len = 0, message_len = 0;
	int code = -EINVAL;
	if (bytes_of(env, argv[0], &path, &path_len) == napi_ok && bytes_of(env, argv[1], &message, &message_len) == napi_ok)
		code = send_datagram(path, path_len, message, message_len);
	free(path);
	free(message);
	return result(env, code);
}

static napi_value journal(napi_env env, napi_callback_info info) {
	size_t argc = 1;
	napi_value argv[1];
	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1) return result(env, -EINVAL);
	char *entry = NULL;
	size_t len = 0;
	int code = bytes_of(env, argv[0], &entry, &len) == napi_ok ? send_journal(entry, len) : -EINVAL;
	free(entry);
	return result(env, code);
}

NAPI_MODULE_INIT() {
	napi_value f;
	napi_create_function(env, "notify", NAPI_AUTO_LENGTH, notify, NULL, &f);
	napi_set_named_property(env, exports, "notify", f);
	napi_create_function(env, "journal", NAPI_AUTO_LENGTH, journal, NULL, &f);
	napi_set_named_property(env, exports, "journal", f);
	return exports;
}
