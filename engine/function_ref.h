// A non-owning reference to something callable, for tasks handed to the thread pool
// and epilogues handed to a product: unlike std::function it never allocates (a decode
// step allocates nothing), and it costs one indirect call. The callable must outlive
// the reference, which holds for a lambda passed straight into a call.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace ordo {

template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> && std::is_invocable_r_v<R, F&, Args...>)
  FunctionRef(F&& f)  // NOLINT(google-explicit-constructor): a lambda converts implicitly
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace ordo
