// Watching libcurl's sockets with epoll, for a loop that drives a multi
// handle through libcurl's socket API (curl_multi_socket_action).

#pragma once

#include <curl/curl.h>

#include <sys/epoll.h>

#include <cerrno>
#include <cstdint>

namespace quarry::host {

/// Applies libcurl's socket callback (CURLMOPT_SOCKETFUNCTION) for `fd` to
/// the epoll set `epoll_fd`: `what` is CURL_POLL_IN, _OUT, _INOUT, _NONE or
/// _REMOVE, `known` the pointer libcurl keeps for the socket (null until
/// assigned; this assigns `tag` to a new socket). A socket libcurl already
/// closed has left the set with its last descriptor, so a number reused by
/// a new socket may need an add where a change was expected, and the other
/// way round; removing a closed one fails harmlessly.
inline void watch_curl_socket(CURLM* multi, int epoll_fd, curl_socket_t fd, int what, void* known,
                              void* tag) {
  if (what == CURL_POLL_REMOVE) {
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
    return;
  }
  epoll_event ev{};
  ev.events = ((what & CURL_POLL_IN) != 0 ? EPOLLIN : 0u)
              | ((what & CURL_POLL_OUT) != 0 ? EPOLLOUT : 0u);
  ev.data.fd = fd;
  if (epoll_ctl(epoll_fd, known != nullptr ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) != 0) {
    if (errno == ENOENT)
      epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev);
    else if (errno == EEXIST)
      epoll_ctl(epoll_fd, EPOLL_CTL_MOD, fd, &ev);
  }
  if (known == nullptr)
    curl_multi_assign(multi, fd, tag);
}

/// The CURL_CSELECT_* flags for curl_multi_socket_action of epoll `events`.
inline int curl_select_flags(uint32_t events) {
  auto flags = 0;
  if ((events & EPOLLIN) != 0)
    flags |= CURL_CSELECT_IN;
  if ((events & EPOLLOUT) != 0)
    flags |= CURL_CSELECT_OUT;
  if ((events & (EPOLLERR | EPOLLHUP)) != 0)
    flags |= CURL_CSELECT_ERR;
  return flags;
}

} // namespace quarry::host
