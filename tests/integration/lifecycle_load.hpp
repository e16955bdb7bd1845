#pragma once
// Continuous HTTP load through nginx for the lifecycle tests: a few client threads, each sending
// one request per connection until stopped (bounded in count and time), recording every outcome.
#include "harness.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace it {

class HttpLoad {
public:
  struct Sample {
    std::chrono::steady_clock::time_point start;
    double ms = 0;
    int status = 0; // 0: socket error or timeout
  };

  // `body` non-empty: POST it (nginx retries a failed GET on its own, never a POST).
  HttpLoad(int port, std::string target, int threads, std::size_t max_requests = 200'000,
           std::string body = {})
      : port_(port), target_(std::move(target)), body_(std::move(body)), max_(max_requests) {
    for (int i = 0; i < threads; ++i)
      threads_.emplace_back([this] { run(); });
  }
  ~HttpLoad() { stop(); }

  void stop() {
    stop_ = true;
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

  // Requests answered or failed so far (callable while running).
  std::size_t completed() const { return completed_; }
  // Waits until `n` more requests than now have completed: the load has run for a while, in
  // requests rather than in time.
  bool wait_more(std::size_t n, Millis timeout = Millis{20000}) const {
    return wait_completed(completed_ + n, timeout);
  }
  // Waits until `n` requests in all have completed.
  bool wait_completed(std::size_t n, Millis timeout = Millis{20000}) const {
    return test_wait::wait_until([&] { return completed_ >= n; }, timeout);
  }

  // Call after stop().
  const std::vector<Sample>& samples() const { return samples_; }
  std::size_t failures() const {
    return std::count_if(samples_.begin(), samples_.end(),
                         [](const Sample& s) { return s.status < 200 || s.status > 299; });
  }
  std::string first_error() const { return first_error_; }
  // p99 latency (ms) of the samples started in [from, to).
  double p99(std::chrono::steady_clock::time_point from,
             std::chrono::steady_clock::time_point to) const {
    std::vector<double> v;
    for (const Sample& s : samples_)
      if (s.start >= from && s.start < to) v.push_back(s.ms);
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, v.size() * 99 / 100)];
  }
  std::size_t count(std::chrono::steady_clock::time_point from,
                    std::chrono::steady_clock::time_point to) const {
    return std::count_if(samples_.begin(), samples_.end(),
                         [&](const Sample& s) { return s.start >= from && s.start < to; });
  }

private:
  void run() {
    while (!stop_ && issued_++ < max_) {
      Sample s;
      s.start = std::chrono::steady_clock::now();
      try {
        s.status =
            http_request(port_, body_.empty() ? "GET" : "POST", target_, body_, Millis{10000})
                .status;
        if (s.status != 200) note("HTTP status " + std::to_string(s.status));
      } catch (const std::exception& e) {
        note(e.what());
      }
      s.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s.start)
                 .count();
      std::lock_guard<std::mutex> lock(mutex_);
      samples_.push_back(s);
      ++completed_;
    }
  }
  void note(const std::string& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (first_error_.empty()) first_error_ = e;
  }

  int port_;
  std::string target_;
  std::string body_;
  std::size_t max_;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> issued_{0};
  std::atomic<std::size_t> completed_{0};
  std::mutex mutex_;
  std::vector<Sample> samples_;
  std::string first_error_;
  std::vector<std::thread> threads_;
};

// The pid in a pidfile, or 0.
inline pid_t read_pid(const std::string& path) {
  return static_cast<pid_t>(std::atol(read_file(path).c_str()));
}

} // namespace it
