//! Handlers tried without a broker: a worker that never connects, on which the generated
//! functions register the handlers under test, and each delivery's verdict.

use warren_runtime::rpc::Operation;
use warren_runtime::trial::{Arrival, TrialError, Verdict};
use warren_runtime::{Connection, Message, Topology, Worker};

/// Tries a service's handlers without a broker, through the worker's own decode, the
/// generated adapters and the queue's retry policy: what a running worker would do with a
/// delivery, as a [`Verdict`] (acked; retried, with its wait queue and delay, or requeued;
/// dead-lettered, with its reason and the headers the dead letter carries; dropped or
/// discarded; an RPC request answered, with its reply). A handler's unit test needs no RabbitMQ; a broker test in warren's own suite
/// proves that both paths decide alike.
///
/// ```
/// use warren_example_orders::types::{OrderCancelled, OrderCancelledReason};
/// use warren_example_orders::{consumers, messages, topology};
/// use warren_runtime::trial::Verdict;
/// use warren_runtime::{Delivery, HandlerError, NoHeaders};
/// use warren_testkit::Trial;
///
/// /// The handler under test: the mail server is down.
/// struct Notify;
///
/// impl consumers::NotifyCancellation for Notify {
///     async fn handle(&self, _: Delivery<OrderCancelled>) -> Result<(), HandlerError> {
///         Err(HandlerError::retryable("smtp: 421 try again later"))
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut trial = Trial::new(topology());
/// consumers::register::notify_cancellation(trial.worker(), Notify);
/// let order_id = "0190a0b0-0000-7000-8000-000000000001".parse().unwrap();
/// let cancelled = OrderCancelled::new(order_id, OrderCancelledReason::OutOfStock);
/// let verdict = trial
///     .deliver("notify_cancellation", messages::OrderCancelled, &cancelled, &NoHeaders {})
///     .await;
/// // Its queue is quorum-native: back to the queue, where the broker counts the delivery.
/// assert!(matches!(verdict, Verdict::Requeued { exhausted: false, .. }), "{verdict:?}");
/// assert_eq!(verdict.error(), Some("smtp: 421 try again later"));
/// # }
/// ```
pub struct Trial {
    worker: Worker,
    jitter: Option<f64>,
}

impl Trial {
    /// A worker for `topology` on a connection that never connects. Register the handlers to
    /// try on [`Trial::worker`], with the generated `consumers::register` functions or
    /// `Handlers { .. }.register`.
    pub fn new(topology: Topology) -> Self {
        Self {
            worker: Worker::new(Connection::detached("warren-trial"), topology),
            jitter: None,
        }
    }

    /// The worker the handlers are registered on; its settings (validation, body cap) are
    /// the ones tried.
    pub fn worker(&mut self) -> &mut Worker {
        &mut self.worker
    }

    /// Picks a ttl-backoff retry's wait tier with jitter by `random`, in `[0, 1)`, rather
    /// than at random as a worker does: for a test that asserts the tier.
    pub fn jitter(mut self, random: f64) -> Self {
        self.jitter = Some(random);
        self
    }

    /// What consumer `consumer` does with `payload` and `headers` published as `message` by
    /// warren's publishers (a first delivery, through the first binding of its queue).
    ///
    /// # Panics
    ///
    /// When the payload or headers break the message's schemas (a publisher would refuse
    /// them: use [`Trial::arrive`] with [`Arrival::raw`] to try what another stack sends),
    /// or as [`Trial::arrive`] panics.
    pub async fn deliver<M: Message>(
        &self,
        consumer: &str,
        message: M,
        payload: &M::Payload,
        headers: &M::Headers,
    ) -> Verdict {
        let arrival = Arrival::of(message, payload, headers)
            .unwrap_or_else(|error| panic!("message `{}` cannot be published: {error}", M::NAME));
        self.arrive(consumer, &arrival).await
    }

    /// What RPC server `server` (registered under the operation's name) does with the
    /// request `payload` and `headers` of `operation`, as the generated client sends it: an
    /// answer is [`Verdict::Replied`], which [`Verdict::answer`] reads as the caller would.
    ///
    /// ```
    /// use warren_example_orders::consumers;
    /// use warren_example_orders::rpcs::{QuotePrice, QuotePriceError};
    /// use warren_example_orders::types::{PriceQuote, QuoteError, QuoteRequest};
    /// use warren_runtime::rpc::{RpcError, RpcHandlerError};
    /// use warren_runtime::{Delivery, NoHeaders};
    /// use warren_testkit::Trial;
    ///
    /// /// The server under test: its catalogue knows no sku.
    /// struct Prices;
    ///
    /// impl consumers::QuotePrice for Prices {
    ///     async fn handle(
    ///         &self,
    ///         request: Delivery<QuoteRequest>,
    ///     ) -> Result<PriceQuote, RpcHandlerError<QuotePriceError>> {
    ///         let sku = request.payload().skus[0].clone();
    ///         Err(QuotePriceError::UnknownSku(QuoteError { sku }).into())
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut trial = Trial::new(warren_example_orders::topology());
    /// consumers::register::quote_price(trial.worker(), Prices);
    /// let request = QuoteRequest {
    ///     skus: vec!["sku-1".to_owned()],
    ///     region: "eu".to_owned(),
    /// };
    /// let verdict = trial
    ///     .request("quote_price", QuotePrice, &request, &NoHeaders {})
    ///     .await;
    /// match verdict.answer::<QuotePrice>() {
    ///     Some(Err(RpcError::Declared(QuotePriceError::UnknownSku(error)))) => {
    ///         assert_eq!(error.sku, "sku-1")
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    /// # }
    /// ```
    ///
    /// # Panics
    ///
    /// When the payload or headers break the request's schemas (the client would refuse
    /// them), or as [`Trial::arrive`] panics.
    pub async fn request<O: Operation>(
        &self,
        server: &str,
        operation: O,
        payload: &<O::Request as Message>::Payload,
        headers: &<O::Request as Message>::Headers,
    ) -> Verdict {
        let arrival = Arrival::request(operation, payload, headers).unwrap_or_else(|error| {
            panic!("operation `{}` cannot send this request: {error}", O::NAME)
        });
        self.arrive(server, &arrival).await
    }

    /// What consumer `consumer` does with `arrival`: any bytes and properties, through any
    /// exchange, as a first delivery or as a retry ([`Arrival::retried`]).
    ///
    /// # Panics
    ///
    /// When no consumer `consumer` is registered or its queue is not in the topology: a
    /// mistake in the test, not a verdict.
    pub async fn arrive(&self, consumer: &str, arrival: &Arrival) -> Verdict {
        self.try_arrive(consumer, arrival)
            .await
            .unwrap_or_else(|error| panic!("{error}"))
    }

    /// [`Trial::arrive`], with why the trial could not run as an error rather than a panic.
    pub async fn try_arrive(
        &self,
        consumer: &str,
        arrival: &Arrival,
    ) -> Result<Verdict, TrialError> {
        self.worker.trial(consumer, arrival, self.jitter).await
    }
}
