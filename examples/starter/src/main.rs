//! Declares the topology, publishes one task, and runs the handlers until Ctrl-C:
//! `cargo run`, with a RabbitMQ at `AMQP_URL` (default `amqp://guest:guest@127.0.0.1:5672/%2f`).

use warren_runtime::{Connection, Publisher, Worker};
use warren_starter::types::{TaskCreated, TaskCreatedKind};
use warren_starter::{Handlers, Publishers, Tasks, topology};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
    // Reconnects by itself, and declares the topology again when it does.
    let connection = Connection::connect(&url, "warren-starter").await?;
    let topology = topology();
    warren_runtime::declare(&connection, &topology).await?;

    let publishers = Publishers::new(Publisher::new(&connection, &topology).await?);
    let task_id = "0190a0b0-0000-7000-8000-000000000001".parse()?;
    let task = TaskCreated::new(TaskCreatedKind::Report, task_id);
    // Validated against the schema, then confirmed by the broker.
    publishers.create_task("report", &task).await?;
    println!("published a report task; handling until Ctrl-C");

    let worker = Worker::new(connection.clone(), topology);
    let stop = worker.shutdown_handle();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.shutdown(); // stops consuming, lets running handlers finish
    });
    Handlers { run_tasks: Tasks }.run(worker).await?;
    connection.close().await?;
    Ok(())
}
